"""The MCP tools with ``~`` and ``$HOME`` (issue 23): a model writes ``venv=~/venv`` and ``~/run`` as a user
does, and the far side expands them as the home of the user the work runs as. The loopback sshd, a zsh
login user whose numpy is only in ``~/venv`` (tests/remote/home_run.py)."""

from __future__ import annotations

import os
import pwd

import pytest
from mcp_harness import McpSession, text_of

from fixtures.sshd import SshServer
from remote.home_run import NAN_TENSOR, HomeUser, make_home_user

pytestmark = [pytest.mark.ssh, pytest.mark.usefixtures("sshd")]


@pytest.fixture(scope="module")
def user(sshd: SshServer) -> HomeUser:
    return make_home_user(sshd)


def test_scan_of_a_home_run_through_a_home_venv(allowing: McpSession, user: HomeUser) -> None:
    result = allowing.call("scan", {"paths": ["~/run"], "target": user.target("venv=~/venv")})
    assert not result.is_error, text_of(result)
    unit = str(user.home / "run" / "step_100" / "model.safetensors")
    [bad] = [f for f in result.structured_content["files"] if f["verdict"] == "nonfinite"]
    assert bad["path"] == unit
    assert [t["name"] for t in bad["tensors"] if t["nan"]] == [NAN_TENSOR]
    assert text_of(result).startswith("scan: nonfinite (exit code 1) — 1 file(s)")
    assert f"- nonfinite: {unit} (safetensors)" in text_of(result)


def test_triage_of_a_dollar_home_run(allowing: McpSession, user: HomeUser) -> None:
    result = allowing.call("triage", {"run_dir": "$HOME/run", "target": user.target("venv=~/venv")})
    assert not result.is_error, text_of(result)
    doc = result.structured_content
    assert doc["run_dir"] == str(user.home / "run")
    assert [u["verdict"] for u in doc["units"]] == ["nonfinite"]
    assert text_of(result).startswith(f"triage of {user.home}/run on {user.target('venv=~/venv')}: ")


def test_a_missing_home_path_is_an_error_naming_both(allowing: McpSession, user: HomeUser) -> None:
    result = allowing.call("logs", {"paths": ["~/nope"], "target": user.target("venv=~/venv")})
    assert result.is_error
    assert f"~/nope ({user.home}/nope): no such file or directory" in text_of(result)
    venv = allowing.call("scan", {"paths": ["~/run"], "target": user.target("venv=~/nope")})
    assert venv.is_error
    assert f"venv=~/nope has no Python interpreter at {user.home}/nope/bin/python" in text_of(venv)


def test_the_descriptions_teach_it(allowing: McpSession) -> None:
    tools = {tool.name: tool for tool in allowing.tools()}
    assert "`ssh=gpu07//venv=~/venv` with the path `~/runs/exp3` works as written" in (
        tools["triage"].description or ""
    )
    for name, parameter in [("scan", "paths"), ("triage", "run_dir"), ("diff", "a"), ("watch_tail", "path")]:
        description = tools[name].input_schema["properties"][parameter]["description"]
        assert "`~/x` and `$HOME/x` are the home of the user the work runs as there" in description, name


def test_watch_tail_reads_a_log_under_home(allowing: McpSession, user: HomeUser) -> None:
    result = allowing.call("watch_tail", {"path": "~/run/train.log", "target": user.target("venv=~/venv")})
    assert not result.is_error, text_of(result)
    assert result.structured_content["tail"]["path"] == str(user.home / "run" / "train.log")


def test_the_local_default_expands_the_same_way(allowing: McpSession) -> None:
    own = pwd.getpwuid(os.getuid()).pw_dir
    name = f"tp-nope-{os.getpid()}"
    result = allowing.call("logs", {"paths": [f"~/{name}"]})
    assert result.is_error
    assert f"~/{name} ({own}/{name}): no such file or directory" in text_of(result)
