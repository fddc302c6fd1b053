"""``~`` and ``$HOME`` on the far side (issue 23): users write ``venv=~/venv`` and ``'~/run'`` without
thinking; they are the home of the user the code runs as there, expanded by the far side's Python (never a
shell), in the hop settings and in every path of ``scan``/``check``/``diff``/``logs``/``triage``/``watch``
``--on``. Through the real loopback sshd, as a zsh login user whose numpy is only in ``~/venv``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.sshd import SshServer
from trainprobe.errors import InterpreterNotFoundError, RemoteExceptionError, UsageError
from trainprobe.remote import run
from trainprobe.tasks import scan_sharded
from trainprobe.tasks.sharded import _unit_path
from trainprobe.tasks.watch import RemoteFollower
from waiting import EVENT_DEADLINE_S, wait_for

from .home_run import NAN_TENSOR, HomeUser, make_home_user

pytestmark = pytest.mark.ssh
TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))
#: the run's one checkpoint unit (a folder of one file is that file), under the home
UNIT = "run/step_100/model.safetensors"
WHERE = "import os, sys\ndef main():\n    return [os.getcwd(), sys.executable]\n"


@pytest.fixture(scope="module")
def user(sshd: SshServer) -> HomeUser:
    return make_home_user(sshd)


def trainprobe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRAINPROBE, *args], capture_output=True, text=True, timeout=300)


def said(proc: subprocess.CompletedProcess[str]) -> str:
    """What the user reads, lines joined (the terminal report wraps long paths)."""
    return " ".join((proc.stdout + proc.stderr).split())


def test_scan_with_venv_under_home_finds_the_nan_in_the_home_run(user: HomeUser) -> None:
    proc = trainprobe("scan", "--on", user.target("venv=~/venv"), "~/run", "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    [bad] = [f for f in doc["files"] if f["verdict"] == "nonfinite"]
    assert bad["path"] == str(user.home / UNIT)
    assert [(t["name"], t["nan"]) for t in bad["tensors"] if t["nan"]] == [(NAN_TENSOR, 1)]
    terminal = trainprobe("scan", "--on", user.target("venv=~/venv"), "~/run")
    assert terminal.returncode == 1
    assert f"NON-FINITE {user.home}/run/step_100/model.safetensors" in said(terminal)


def test_triage_of_a_dollar_home_run_finds_the_nan_checkpoint(user: HomeUser) -> None:
    proc = trainprobe("triage", "--on", user.target("venv=~/venv"), "$HOME/run", "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["run_dir"] == str(user.home / "run")
    assert [(u["path"], u["verdict"]) for u in doc["units"]] == [(str(user.home / UNIT), "nonfinite")]


@pytest.mark.parametrize(
    ("setting", "interpreter"),
    [("python=${HOME}/venv/bin/python", "venv/bin/python"), ("venv=$HOME/venv", "venv/bin/python")],
)
def test_every_spelling_of_home_in_interpreter_settings(
    user: HomeUser, setting: str, interpreter: str
) -> None:
    result = run(user.target(setting), WHERE)
    assert result.error is None, result.error
    assert result.result == [str(user.home), str(user.home / interpreter)]


def test_cd_under_home_and_a_relative_path_from_there(user: HomeUser) -> None:
    result = run(user.target("venv=~/venv", "cd=~/run"), WHERE)
    assert result.error is None, result.error
    assert result.result[0] == str(user.home / "run")
    proc = trainprobe("check", "--on", user.target("venv=~/venv", "cd=$HOME/run"), "step_100", "--json")
    assert proc.returncode == 1, proc.stderr
    assert [u["verdict"] for u in json.loads(proc.stdout)["units"]] == ["nonfinite"]


def test_check_diff_and_logs_take_home_paths(user: HomeUser) -> None:
    target = user.target("venv=~/venv")
    check = trainprobe("check", "--on", target, "~/run/step_100", "--json")
    assert [u["path"] for u in json.loads(check.stdout)["units"]] == [str(user.home / UNIT)]
    diff = trainprobe("diff", "--on", target, "~/run/step_100", "${HOME}/run/step_100", "--json")
    assert diff.returncode in (0, 1), diff.stderr
    assert [t["name"] for t in json.loads(diff.stdout)["tensors"]] == [NAN_TENSOR]
    logs = trainprobe("logs", "--on", target, "~/run/train.log", "--json")
    assert logs.returncode in (0, 1), logs.stderr
    assert [r["path"] for r in json.loads(logs.stdout)["runs"]] == [str(user.home / "run" / "train.log")]


def test_a_missing_home_path_names_the_given_and_the_expanded_path(user: HomeUser) -> None:
    target = user.target("venv=~/venv")
    nope = user.home / "nope"
    logs = trainprobe("logs", "--on", target, "~/nope")
    assert logs.returncode == 2
    assert f"~/nope ({nope}): no such file or directory" in said(logs)
    triage = trainprobe("triage", "--on", target, "$HOME/nope")
    assert triage.returncode == 2
    assert f"$HOME/nope ({nope}): no such file or directory" in said(triage)
    scan = trainprobe("scan", "--on", target, "~/nope")
    assert scan.returncode == 2
    assert f"unreadable {nope} no such file or directory" in said(scan)


def test_a_missing_home_venv_conda_or_cd_names_both(user: HomeUser) -> None:
    result = run(user.target("venv=~/nope"), WHERE)
    assert isinstance(result.error, InterpreterNotFoundError)
    assert result.exit_code == 127
    assert f"venv=~/nope has no Python interpreter at {user.home}/nope/bin/python — check the path" in str(
        result.error
    )
    result = run(user.target("conda=~/nope"), WHERE)
    assert f"conda=~/nope has no Python interpreter at {user.home}/nope/bin/python" in str(result.error)
    result = run(user.target("cd=~/nope"), WHERE)
    assert isinstance(result.error, RemoteExceptionError)
    assert f"cd=~/nope ({user.home}/nope): No such file or directory" in str(result.error)


def test_paths_that_only_look_like_home_are_left_alone(user: HomeUser) -> None:
    """Script arguments are the script's (``run`` passes them as given); only ``~`` and ``$HOME`` that start
    a path, alone or before ``/``, are the home."""
    script = "import sys\ndef main():\n    return sys.argv[1:]\n"
    args = ["~/x", "$HOME", "$HOMEX/y", "a/~/b"]
    result = run(user.target("venv=~/venv"), script, args)
    assert result.result == args
    logs = trainprobe("logs", "--on", user.target("venv=~/venv"), "$HOMEX/y")
    assert logs.returncode == 2
    assert "$HOMEX/y: no such file or directory" in said(logs)


@pytest.fixture
def sudo_to_user(sshd: SshServer, user: HomeUser) -> Iterator[str]:
    """The bash user may run anything as the home user (sudo -n), for one test."""
    if not Path("/usr/bin/sudo").exists():
        pytest.skip("needs sudo (see .ci/run)")
    rule = Path(f"/etc/sudoers.d/trainprobe-test-home-{os.getpid()}")
    rule.write_text(f"{sshd.setup.users['bash']} ALL=({user.name}) NOPASSWD: ALL\n")
    rule.chmod(0o440)
    try:
        yield f"{sshd.target('bash')}//sudo={user.name}"
    finally:
        rule.unlink()


def test_after_sudo_home_is_the_user_the_code_runs_as(user: HomeUser, sudo_to_user: str) -> None:
    proc = trainprobe("scan", "--on", f"{sudo_to_user}//venv=~/venv", "~/run", "--json")
    assert proc.returncode == 1, proc.stderr
    assert {f["path"] for f in json.loads(proc.stdout)["files"]} == {str(user.home / UNIT)}


def test_a_local_target_expands_the_same_way(tmp_path: Path) -> None:
    """No hop: the home of the user this runs as (its passwd entry), by the same far-side code."""
    import pwd

    own = pwd.getpwuid(os.getuid()).pw_dir
    result = run(f"local//python={sys.executable}//cd=~", WHERE)
    assert result.error is None, result.error
    assert result.result[0] == own
    name = f"tp-nope-{os.getpid()}"
    logs = trainprobe("logs", "--on", "local", f"~/{name}")
    assert logs.returncode == 2
    assert f"~/{name} ({own}/{name}): no such file or directory" in said(logs)


def test_watch_follows_a_log_under_home(user: HomeUser) -> None:
    got: list[str] = []
    follower = RemoteFollower(user.target(), "~/run/train.log", got.extend, interval=0.05)
    cancel = threading.Event()
    thread = threading.Thread(target=follower.run, args=(cancel,), daemon=True)
    thread.start()
    try:
        want = (user.home / "run" / "train.log").read_text().splitlines()
        wait_for(lambda: len(got) >= len(want), what="the log's lines")
        assert got == want
    finally:
        cancel.set()
        thread.join(EVENT_DEADLINE_S)
    assert not thread.is_alive()


def test_a_sharded_scan_of_a_unit_under_home(user: HomeUser) -> None:
    result = scan_sharded([user.target("venv=~/venv")], "~/run/step_100")
    doc = result.to_json()
    assert [(f["path"], f["verdict"]) for f in doc["files"]] == [(str(user.home / UNIT), "nonfinite")]


def test_a_sharded_path_that_is_another_directory_on_each_target_is_refused() -> None:
    """Two targets whose users have different homes: ``~/ckpt`` names no one unit."""
    inventories = {"ssh=a@n1": {"path": "/home/a/ckpt"}, "ssh=b@n2": {"path": "/home/b/ckpt"}}
    with pytest.raises(UsageError, match="~/ckpt is /home/a/ckpt or /home/b/ckpt on different targets"):
        _unit_path("~/ckpt", inventories)
    assert _unit_path("~/ckpt", {"ssh=a@n1": {"path": "/home/a/ckpt"}}) == "/home/a/ckpt"
