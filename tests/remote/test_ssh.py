"""Through a real OpenSSH server on loopback, as users whose login shells are bash, zsh, fish, dash, tcsh."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.sshd import SHELLS, SshServer, free_port
from trainprobe.errors import (
    AuthenticationError,
    InterpreterNotFoundError,
    RemoteExceptionError,
    RemoteTimeoutError,
    UnreachableError,
)
from trainprobe.remote import run
from trainprobe.remote.probe import probe
from waiting import EVENT_DEADLINE_S, wait_for

from .faults import assert_nothing_left, dead, far_leftovers
from .scripts import BIG_OUTPUT, NASTY_ARGS, SLEEPER, TRICKY_SCRIPT, TRICKY_STDOUT_START, big_output_digest

pytestmark = pytest.mark.ssh
SYSTEM_PYTHON = "/usr/bin/python3"
TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))


def make_venv(path: Path, module: str | None) -> None:
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(path)], check=True)
    if module:
        site = next(path.glob("lib/python3*/site-packages"))
        (site / f"{module}.py").write_text("WHERE = __file__\n")


@pytest.fixture(scope="module")
def venvs(sshd: SshServer) -> dict[str, Path]:
    """zsh user: ~/venv with tp_only_here. bash user: ~/a-venv without it, ~/b-venv with it."""
    made = {
        "zsh": sshd.setup.home("zsh") / "venv",
        "bash-a": sshd.setup.home("bash") / "a-venv",
        "bash-b": sshd.setup.home("bash") / "b-venv",
    }
    make_venv(made["zsh"], "tp_only_here")
    make_venv(made["bash-a"], None)
    make_venv(made["bash-b"], "tp_only_here")
    return made


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_tricky_script_and_arguments_under_every_login_shell(
    sshd: SshServer, shell: str, tmp_path: Path
) -> None:
    script = tmp_path / "tricky.py"
    script.write_text(TRICKY_SCRIPT)
    chunks: list[bytes] = []
    result = run(sshd.target(shell), script, NASTY_ARGS, stdout=chunks.append)
    assert result.error is None, result.error
    out = b"".join(chunks).decode()
    assert out.startswith(TRICKY_STDOUT_START)
    assert json.loads(out.splitlines()[-1]) == NASTY_ARGS
    assert result.result == {"argv": NASTY_ARGS, "name": "wörld", "emoji": "🚀"}


def test_discovery_finds_the_venv_that_has_the_package(sshd: SshServer, venvs: dict[str, Path]) -> None:
    assert subprocess.run([SYSTEM_PYTHON, "-c", "import tp_only_here"], capture_output=True).returncode
    script = "import tp_only_here, sys\ndef main():\n    return [sys.executable, tp_only_here.WHERE]\n"
    result = run(sshd.target("zsh"), script)
    assert result.error is None, result.error
    python, where = result.result
    assert python == str(venvs["zsh"] / "bin" / "python")
    assert where.startswith(str(venvs["zsh"]))


def test_need_picks_the_interpreter_that_has_the_module(sshd: SshServer, venvs: dict[str, Path]) -> None:
    script = "import sys\ndef main():\n    return sys.executable\n"
    assert run(sshd.target("bash"), script).result == str(venvs["bash-a"] / "bin" / "python")
    picked = run(sshd.target("bash"), script, need=["tp_only_here", "json"])
    assert picked.result == str(venvs["bash-b"] / "bin" / "python")


def test_need_that_nobody_has_says_what_each_lacked(sshd: SshServer, venvs: dict[str, Path]) -> None:
    result = run(sshd.target("bash"), "pass\n", need=["tp_only_here", "tp_nowhere"])
    assert isinstance(result.error, InterpreterNotFoundError)
    assert result.exit_code == 127
    message = str(result.error)
    assert f"{venvs['bash-a']}/bin/python (3." in message
    assert "lacks tp_only_here, tp_nowhere" in message
    assert f"{venvs['bash-b']}/bin/python (3." in message
    assert "lacks tp_nowhere" in message
    assert SYSTEM_PYTHON in message


def test_venv_hop_names_the_interpreter(sshd: SshServer, venvs: dict[str, Path]) -> None:
    target = f"{sshd.target('fish')}//venv={venvs['bash-b']}"
    result = run(target, "import tp_only_here, sys\ndef main():\n    return sys.executable\n")
    assert result.result == str(venvs["bash-b"] / "bin" / "python")


def test_exit_code_and_traceback_come_back(sshd: SshServer, tmp_path: Path) -> None:
    assert run(sshd.target("tcsh"), "import sys\nsys.exit(42)\n").exit_code == 42
    script = tmp_path / "fails.py"
    script.write_text("def helper():\n    raise KeyError('missing shard')\n\n\nhelper()\n")
    result = run(sshd.target("tcsh"), script)
    assert isinstance(result.error, RemoteExceptionError)
    assert result.exit_code == 1
    assert f'File "{script}", line 2, in helper' in result.error.remote_traceback
    assert "raise KeyError('missing shard')" in result.error.remote_traceback


@pytest.mark.slow
def test_100_mib_of_binary_output_arrives_whole(sshd: SshServer) -> None:
    digest = hashlib.sha256()
    size = 0

    def take(data: bytes) -> None:
        nonlocal size
        digest.update(data)
        size += len(data)

    result = run(sshd.target("bash"), BIG_OUTPUT, ["100"], stdout=take)
    assert result.ok, result.error
    assert size == 100 << 20
    assert digest.hexdigest() == big_output_digest(100)
    assert result.stdout_path is not None
    assert result.stdout_path.stat().st_size == 100 << 20


#: what a sleeper run leaves on the far side if its cleanup fails
SLEEPER_PROCESSES = "sleep|python"


@pytest.mark.timing
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_killing_the_local_side_leaves_nothing_running(
    sshd: SshServer, tmp_path: Path, how: signal.Signals
) -> None:
    user = sshd.setup.users["dash"]
    assert_nothing_left(user, pattern=SLEEPER_PROCESSES)  # an earlier test's run is gone (or being reaped)
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    with subprocess.Popen(
        [TRAINPROBE, "run", sshd.target("dash"), str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as proc:
        assert proc.stdout is not None
        pids = proc.stdout.readline().split()
        assert len(pids) == 2  # the script runs and has started its child
        assert any("sleep 300" in line for line in far_leftovers(user))
        proc.send_signal(how)
        proc.wait(EVENT_DEADLINE_S)
    assert_nothing_left(user, pattern=SLEEPER_PROCESSES)
    if how == signal.SIGINT:
        assert proc.returncode == 130


@pytest.mark.timing
def test_timeout_kills_the_far_side(sshd: SshServer) -> None:
    user = sshd.setup.users["fish"]
    start = time.monotonic()
    result = run(sshd.target("fish"), SLEEPER, timeout=5)
    assert isinstance(result.error, RemoteTimeoutError)
    assert result.exit_code == 124
    assert time.monotonic() - start < 5 + 10  # the kill's grace, with room for a loaded machine
    assert_nothing_left(user, pattern=SLEEPER_PROCESSES)


def test_connection_reuse_survives_a_dead_master(sshd: SshServer) -> None:
    control = Path(os.environ["TRAINPROBE_CONTROL_DIR"])
    target = sshd.target("zsh")
    assert run(target, "pass\n").ok
    sockets = list(control.iterdir())
    assert sockets, "the first run leaves a ControlMaster socket"
    check = subprocess.run(
        [
            "ssh",
            "-F",
            os.environ["TRAINPROBE_SSH_CONFIG"],
            "-o",
            f"ControlPath={sockets[0]}",
            "-O",
            "check",
            "x",
        ],
        capture_output=True,
        text=True,
    )
    master = int(check.stderr.split("pid=")[1].split(")")[0])
    os.kill(master, signal.SIGKILL)  # the socket file stays behind, stale
    wait_for(lambda: dead(master), what="the master's death")
    assert sockets[0].exists()
    again = run(target, "def main():\n    return 'still works'\n")
    assert again.error is None, again.error
    assert again.result == "still works"


def test_jump_hosts_chain(sshd: SshServer) -> None:
    target = f"{sshd.target('bash')}//{sshd.target('tcsh')}"
    result = run(target, "import getpass\ndef main():\n    return getpass.getuser()\n")
    assert result.result == sshd.setup.users["tcsh"]


def test_unknown_user_is_authentication_refused(sshd: SshServer) -> None:
    result = run(f"ssh=tpnosuchuser@{sshd.host}:{sshd.port}", "pass\n")
    assert isinstance(result.error, AuthenticationError)
    assert result.exit_code == 255
    assert "authentication refused" in str(result.error)


def test_closed_port_is_unreachable(sshd: SshServer) -> None:
    result = run(f"ssh={sshd.host}:{free_port()}", "pass\n")
    assert isinstance(result.error, UnreachableError)
    assert result.exit_code == 255
    assert "Connection refused" in str(result.error)


def test_probe_lists_interpreters_in_discovery_order(sshd: SshServer, venvs: dict[str, Path]) -> None:
    report = probe(sshd.target("bash"), cuda=False)
    pythons = [entry["python"] for entry in report["interpreters"]]
    assert pythons[:2] == [str(venvs["bash-a"] / "bin/python"), str(venvs["bash-b"] / "bin/python")]
    assert SYSTEM_PYTHON in pythons
    assert report["user"] == sshd.setup.users["bash"]
    assert report["disks"]
    assert len(report["load"]) == 3


def test_cli_run_streams_output_and_says_where_the_log_is(sshd: SshServer, tmp_path: Path) -> None:
    script = tmp_path / "hello.py"
    script.write_text("import sys\nprint('out', sys.argv[1:])\nprint('err', file=sys.stderr)\nsys.exit(3)\n")
    proc = subprocess.run(
        [TRAINPROBE, "run", sshd.target("zsh"), str(script), "--", "-x", "$HOME"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 3
    assert proc.stdout == "out ['-x', '$HOME']\n"
    assert "err\n" in proc.stderr
    log = Path(proc.stderr.split("log: ")[1].split()[0])
    assert (log / "stdout").read_text() == proc.stdout
    as_json = subprocess.run(
        [TRAINPROBE, "run", "--json", sshd.target("zsh"), str(script)], capture_output=True, text=True
    )
    document = json.loads(as_json.stdout)
    assert document["exit_code"] == 3
    assert document["target"] == sshd.target("zsh")
    assert Path(document["stdout_log"]).read_text() == "out []\n"


def test_cli_reports_a_bad_target_in_one_line(tmp_path: Path) -> None:
    script = tmp_path / "x.py"
    script.write_text("pass\n")
    proc = subprocess.run([TRAINPROBE, "run", "sshh=host", str(script)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "unknown hop kind 'sshh'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_login_script_noise_on_stdout_is_kept_out_of_the_output(sshd: SshServer) -> None:
    rc = sshd.setup.home("tcsh") / ".tcshrc"
    rc.write_text("echo 'noise from .tcshrc'\n")
    try:
        chunks: list[bytes] = []
        result = run(sshd.target("tcsh"), "print('clean')\n", stdout=chunks.append)
    finally:
        rc.unlink()
    assert result.ok, result.error
    assert b"".join(chunks) == b"clean\n"
    assert result.log_dir is not None
    assert "noise from .tcshrc" in (result.log_dir / "transport.log").read_text()


@pytest.fixture
def sudoers(sshd: SshServer) -> Iterator[Path]:
    """Lets the bash user run anything as the dash user without a password (sudo -n), for one test."""
    if not Path("/usr/bin/sudo").exists():
        pytest.skip("needs sudo (see .ci/run)")
    users = sshd.setup.users
    rule = Path(f"/etc/sudoers.d/trainprobe-test-{os.getpid()}")
    rule.write_text(f"{users['bash']} ALL=({users['dash']}) NOPASSWD: ALL\n")
    rule.chmod(0o440)
    try:
        yield rule
    finally:
        rule.unlink()


def test_sudo_hop_runs_as_the_other_user(sshd: SshServer, sudoers: Path) -> None:
    users = sshd.setup.users
    script = "import getpass, sys\ndef main():\n    return [getpass.getuser(), sys.argv[1:]]\n"
    result = run(f"{sshd.target('bash')}//sudo={users['dash']}", script, ["it's $HOME"])
    assert result.error is None, result.error
    assert result.result == [users["dash"], ["it's $HOME"]]


def test_sudo_that_wants_a_password_is_one_clear_error(sshd: SshServer, sudoers: Path) -> None:
    result = run(f"{sshd.target('bash')}//sudo={sshd.setup.users['fish']}", "pass\n")
    assert isinstance(result.error, AuthenticationError)
    assert "sudo refused: a password is required" in str(result.error)


@pytest.mark.parametrize("shell", ["fish", "tcsh"])
def test_interpreter_path_with_spaces_and_shell_characters(sshd: SshServer, shell: str) -> None:
    venv = sshd.setup.home(shell) / "my envs" / "v$1 (a&b); *"
    venv.parent.mkdir(exist_ok=True)
    make_venv(venv, "tp_only_here")
    result = run(f"{sshd.target(shell)}//venv={venv}", "import sys\ndef main():\n    return sys.prefix\n")
    assert result.error is None, result.error
    assert result.result == str(venv)
