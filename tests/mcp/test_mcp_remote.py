"""Tools with a real remote target: the loopback sshd, a zsh login user, a Python that has numpy and neither
trainprobe nor the MCP SDK. The far side computes the same documents the library computes here."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_harness import McpSession, text_of, without_timings

from fixtures.sshd import SshServer
from trainprobe.checkpoint import scan
from trainprobe.checkpoint.diff import diff_paths_json
from trainprobe.metrics import analyze
from trainprobe.tasks import triage_on
from triage.runs import STALL_FLOOR, story_run

pytestmark = [pytest.mark.ssh, pytest.mark.usefixtures("sshd")]


@pytest.fixture(scope="module")
def target(sshd: SshServer, numpy_venv: Path) -> str:
    return f"{sshd.target('zsh')}//python={numpy_venv}"


def test_scan_where_the_files_are(allowing: McpSession, target: str, checkpoints: Path) -> None:
    paths = [str(checkpoints / "*.pt"), str(checkpoints / "bad.safetensors")]  # the glob expands far side
    result = allowing.call("scan", {"paths": paths, "target": target})
    assert not result.is_error, text_of(result)
    assert without_timings(result.structured_content) == without_timings(scan(paths).to_json())
    assert text_of(result).startswith("scan: nonfinite (exit code 1) — 2 file(s)")


def test_logs_and_watch_tail_ship_their_far_side_functions(
    allowing: McpSession, target: str, train_log: Path
) -> None:
    result = allowing.call("logs", {"paths": [str(train_log)], "target": target})
    assert not result.is_error, text_of(result)
    assert result.structured_content == analyze([train_log]).to_json()

    tail = allowing.call("watch_tail", {"path": str(train_log), "target": target, "lines": 100})
    assert not tail.is_error, text_of(tail)
    assert [(f["kind"], f["step"]) for f in tail.structured_content["findings"]] == [("spike", 120)]
    assert tail.structured_content["tail"]["from_byte"] > 0


def test_diff_where_the_files_are(allowing: McpSession, target: str, checkpoints: Path) -> None:
    a, b = str(checkpoints / "pair" / "a.pt"), str(checkpoints / "pair" / "b.pt")
    result = allowing.call("diff", {"a": a, "b": b, "target": target})
    assert result.structured_content == diff_paths_json(a, b)


def test_triage_on_a_target_equals_the_library_on_it(allowing: McpSession, target: str) -> None:
    run_dir = str(story_run("writer", True))
    result = allowing.call("triage", {"run_dir": run_dir, "target": target, "stall_floor_s": STALL_FLOOR})
    assert not result.is_error, text_of(result)
    document = result.structured_content
    library = triage_on(target, run_dir, stall_floor_s=STALL_FLOOR).to_json()
    assert without_timings(document) == without_timings(library)
    assert document["target"] == target
    assert text_of(result).startswith(f"triage of {run_dir} on {target}: problems (exit code 1)")
    resume = document["resume_from"]
    assert f"resume from {resume['relpath']} (step {resume['step']}): " in text_of(result)


def test_run_through_a_zsh_login_shell_keeps_every_byte(allowing: McpSession, target: str) -> None:
    script = "import sys, os\nprint(sys.argv[1:])\ndef main():\n    return os.environ.get('SHELL')\n"
    args = ["{a,b}", "$HOME", "it's", "!!", "*", "EOF"]
    result = allowing.call("run", {"script": script, "args": args, "target": target})
    assert not result.is_error, text_of(result)
    document = result.structured_content
    assert document["result"] == "/usr/bin/zsh"
    assert Path(document["stdout_log"]).read_text() == f"{args}\n"


def test_a_far_side_error_is_the_clis_sentence_with_the_target(
    allowing: McpSession, target: str, checkpoints: Path
) -> None:
    missing = checkpoints / "no.log"  # in a directory the ssh user can read
    result = allowing.call("logs", {"paths": [str(missing)], "target": target})
    assert result.is_error
    assert text_of(result) == f"{target}: {missing}: no such file or directory — check the path"
