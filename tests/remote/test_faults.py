"""The engine under faults injected for real on the fixture sshd: login scripts that read stdin or exec a
shell, a path that drops, a killed agent, a hanging jump, accounts without a shell or with a ForceCommand,
broken Pythons, process limits, crashes, signals, daemons. Each test asserts the documented exit code, a
message that says what failed and what to try, bounded time, and that nothing is left on either side 2 s
after the run (ControlMasters kept on purpose excepted); see docs/remote.md, "Faults".
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fixtures.sshd import SshServer
from trainprobe.errors import (
    AuthenticationError,
    InterpreterNotFoundError,
    RemoteError,
    RemoteExceptionError,
    RemoteKilledError,
    RemoteTimeoutError,
    UnreachableError,
    UsageError,
)
from trainprobe.remote import frames, run, run_errors
from waiting import wait_for

from .faults import (
    assert_nothing_left,
    dead,
    far_leftovers,
    kill_user_processes,
    login_script,
    port_cut,
)
from .scripts import SLEEPER

pytestmark = [pytest.mark.ssh, pytest.mark.timing]  # every fault here is timed: .ci/run's load pass
HELLO = "import socket\nprint('hello from', socket.gethostname())\n"


def no_reuse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPROBE_CONTROL_DIR", "")


# --- item 2: login scripts that read stdin or exec a shell can neither eat the frames nor hang the run -----


def test_a_login_script_that_reads_stdin_with_a_timeout_gets_nothing_of_ours(sshd: SshServer) -> None:
    with login_script(sshd, "zsh", "read -t 1 line\n"):
        out: list[bytes] = []
        result = run(sshd.target("zsh"), HELLO, stdout=out.append, connect_timeout=10)
    assert result.ok, result.error
    assert b"".join(out).startswith(b"hello from")


@pytest.mark.parametrize("reuse", [True, False], ids=["master", "no-master"])
@pytest.mark.parametrize(
    ("shell", "script"),
    [("zsh", "read -r line\n"), ("zsh", "exec bash\n"), ("tcsh", "set x = $<\n")],
    ids=["zsh-read", "zsh-exec-bash", "tcsh-read"],
)
def test_a_login_script_that_waits_on_stdin_is_a_connect_timeout_that_says_what_to_do(
    sshd: SshServer, monkeypatch: pytest.MonkeyPatch, shell: str, script: str, reuse: bool
) -> None:
    if not reuse:
        no_reuse(monkeypatch)
    with login_script(sshd, shell, script):
        start = time.monotonic()
        result = run(sshd.target(shell), HELLO, connect_timeout=3)
        elapsed = time.monotonic() - start
    assert isinstance(result.error, UnreachableError), result.error
    assert result.exit_code == 255
    message = str(result.error)
    assert "no answer within the connect timeout (3 s)" in message
    if reuse:  # the ControlMaster tells that the host is fine: the login shell is what hung
        assert "ssh logged in to the host, but its login shell did not start trainprobe's command" in message
    assert "reads stdin or execs another shell" in message or "reads stdin or execs a shell" in message
    assert "ssh HOST true </dev/null" in message  # what to try next
    assert elapsed < 3 + 10  # the connect timeout, with room for a loaded machine
    assert_nothing_left(sshd.setup.users[shell])


def test_a_login_script_that_sleeps_past_the_connect_timeout_is_named_and_leaves_none_of_ours(
    sshd: SshServer,
) -> None:
    """sshd signals nothing to a session without a terminal, and no command of ours can reach the far side
    before its login script ends (every command goes through it): the login script's own processes run to
    its end, then our bootstrap finds the link gone and exits. Nothing of trainprobe's stays, on either
    side, and the message says what happened and what to do."""
    user = sshd.setup.users["zsh"]
    try:
        with login_script(sshd, "zsh", "sleep 45\n"):
            start = time.monotonic()
            result = run(sshd.target("zsh"), HELLO, connect_timeout=3)
            elapsed = time.monotonic() - start
            assert isinstance(result.error, UnreachableError), result.error
            assert result.exit_code == 255
            assert elapsed < 3 + 10
            message = str(result.error)
            assert (
                "ssh logged in to the host, but its login shell did not start trainprobe's command" in message
            )
            assert "one that sleeps runs to its end" in message
            assert "ssh HOST true </dev/null" in message
            # what stays there is the login shell and its `sleep 45`; none of trainprobe's own processes
            ours = r"^(\S*python|ssh |sh )"  # the bootstrap, stage 1, the agent; a jump's ssh
            assert_nothing_left(user, pattern=ours)  # this side too
            left = far_leftovers(user)
            assert all("sleep 45" in line or "zsh -c" in line for line in left), left
    finally:
        for line in far_leftovers(user, "sleep 45"):  # the login shell's session: the shell and its sleep
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(int(line.split()[0])), signal.SIGKILL)
    assert_nothing_left(user)


def test_sigterm_of_the_cli_mid_run_leaves_nothing_on_either_side(
    sshd: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_reuse(monkeypatch)
    jump, inner = sshd.setup.users["bash"], sshd.setup.users["tcsh"]
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    trainprobe = str(Path(sys.executable).with_name("trainprobe"))
    target = f"{sshd.target('bash')}//{sshd.target('tcsh')}"
    with subprocess.Popen(
        [trainprobe, "run", target, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None
        assert len(proc.stdout.readline().split()) == 2  # the script runs and has started its child
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    try:
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert b"stopped by SIGTERM; the far side was killed" in err
        assert_nothing_left(jump, inner)
    finally:
        kill_user_processes(inner, "sleep 300")


#: a stand-in for a far side whose only python3 is 3.6 (CI has none): the system Python, told it is 3.6
#: before it runs what it was given (``-c BOOT STAGE1 CONFIG``, as the bootstrap starts it)
OLD_PYTHON = """#!/bin/sh
shift
exec /usr/bin/python3 -c "$STAND_IN" "$@"
"""
#: what the stand-in runs first: the version it claims, then the bootstrap it was given
STAND_IN = (
    "import sys; sys.version_info = (3, 6, 15); sys.version = '3.6.15 (stand-in)'; exec(sys.argv.pop(1))"
)


def test_a_far_side_with_only_python_3_6_is_127_no_usable_python(sshd: SshServer) -> None:
    home = sshd.setup.home("zsh")
    bin_dir = home / "py36"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(OLD_PYTHON)
    (bin_dir / "python3").chmod(0o755)
    (bin_dir / "sh").unlink(missing_ok=True)
    (bin_dir / "sh").symlink_to("/bin/sh")
    with login_script(sshd, "zsh", f"export PATH={bin_dir}\nexport STAND_IN={shlex.quote(STAND_IN)}\n"):
        result = run(sshd.target("zsh"), HELLO)
    assert isinstance(result.error, InterpreterNotFoundError), result.error
    assert result.exit_code == 127
    message = str(result.error)
    assert "no usable Python" in message
    assert "is Python 3.6.15; trainprobe's agent needs Python 3.7 or newer" in message
    assert "install Python 3.7 or newer there, or name one with python=" in message
    assert_nothing_left(sshd.setup.users["zsh"])


# --- item 3: nothing outlives the run --------------------------------------------------------------------


@pytest.mark.slow
def test_when_the_path_drops_the_far_side_kills_the_run(
    sshd: SshServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_reuse(monkeypatch)
    monkeypatch.setattr(frames, "HEARTBEAT_S", 0.5)
    monkeypatch.setattr(run_errors, "LINK_LOST_S", 3.0)
    user = sshd.setup.users["dash"]
    results: list[object] = []
    runner = threading.Thread(target=lambda: results.append(run(sshd.target("dash"), SLEEPER)))
    runner.start()
    try:
        wait_for(lambda: any("sleep 300" in line for line in far_leftovers(user)), what="the script's start")
        with port_cut(sshd.port):
            start = time.monotonic()
            wait_for(lambda: not far_leftovers(user), 3.0 + 12, "the far side's kill")
            gone_after = time.monotonic() - start
        runner.join(60)
    finally:
        kill_user_processes(user, "sleep 300")
    # killed for the missed heartbeats (3 s, with room for a loaded machine), not by TCP giving up (30 s)
    assert 2.0 < gone_after < 3.0 + 12
    (result,) = results
    assert isinstance(result.error, RemoteKilledError), result.error  # type: ignore[attr-defined]
    assert "went silent for 3 s; the far side killed the run" in str(result.error)  # type: ignore[attr-defined]
    assert result.exit_code == 255  # type: ignore[attr-defined]
    assert_nothing_left(user)


def test_sigkill_of_the_agent_takes_the_script_and_its_children(sshd: SshServer) -> None:
    user = sshd.setup.users["bash"]
    printed: list[bytes] = []
    results: list[object] = []
    runner = threading.Thread(
        target=lambda: results.append(run(sshd.target("bash"), SLEEPER, stdout=printed.append))
    )
    runner.start()
    try:
        wait_for(lambda: b"\n" in b"".join(printed), what="the script's start")
        script_pid, child_pid = map(int, b"".join(printed).split()[:2])
        with open(f"/proc/{script_pid}/stat") as f:
            agent_pid = int(f.read().rsplit(")", 1)[1].split()[1])
        os.kill(agent_pid, signal.SIGKILL)
        runner.join(20)
        assert_nothing_left(user)
    finally:
        kill_user_processes(user, "sleep 300")
    (result,) = results
    assert isinstance(result.error, RemoteKilledError), result.error  # type: ignore[attr-defined]
    assert "agent ended without a report" in str(result.error)  # type: ignore[attr-defined]
    wait_for(lambda: dead(child_pid), what="the script's child's death")


def test_a_connect_timeout_through_a_jump_host_kills_the_jump_too(
    sshd: SshServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_reuse(monkeypatch)
    jump, inner = sshd.setup.users["bash"], sshd.setup.users["zsh"]
    with login_script(sshd, "zsh", "sleep 20\n"):
        start = time.monotonic()
        result = run(f"{sshd.target('bash')}//{sshd.target('zsh')}", HELLO, connect_timeout=3)
        elapsed = time.monotonic() - start
    try:
        assert isinstance(result.error, UnreachableError), result.error
        assert result.exit_code == 255
        assert elapsed < 3 + 10  # the connect timeout, with room for a loaded machine
        # the ProxyJump helper here and its session on the jump host are gone; the inner login script's own
        # `sleep 20` runs to its end (sshd signals nothing to a session without a terminal: docs/remote.md)
        assert_nothing_left(jump)
    finally:
        kill_user_processes(inner, "sleep 20")


def test_a_timeout_does_not_wait_for_a_setsid_daemon(sshd: SshServer) -> None:
    user = sshd.setup.users["dash"]
    # a script that runs until the timeout kills it, leaving a daemon behind
    daemon = (
        "import subprocess, time\nsubprocess.Popen(['setsid', 'sleep', '31'])\n"
        "time.sleep(60)\n"  # outlives the 4 s timeout on purpose, not a wait
    )
    try:
        start = time.monotonic()
        result = run(sshd.target("dash"), daemon, timeout=4)
        elapsed = time.monotonic() - start
        assert isinstance(result.error, RemoteTimeoutError), result.error
        assert result.exit_code == 124
        # the daemon holds the run's pipes for 31 s: a run that waited for them (or drained until they closed)
        # takes longer than that; the timeout, the kill's grace (1 s) and a loaded machine's ssh take far less
        assert elapsed < 4 + 20
        assert any("sleep 31" in line for line in far_leftovers(user))  # documented: a daemon survives
    finally:
        kill_user_processes(user, "sleep 31")
    assert_nothing_left(user)


# --- item 5: every failure says what failed -----------------------------------------------------------------


def test_an_account_without_a_shell_is_named_in_full(sshd: SshServer) -> None:
    user = sshd.setup.add_user("nologin", "/usr/sbin/nologin")
    result = run(f"ssh={user}@{sshd.host}:{sshd.port}", HELLO)
    assert isinstance(result.error, AuthenticationError), result.error
    assert "has no login shell there (nologin): This account is currently not available." in str(result.error)
    assert result.exit_code == 255
    assert_nothing_left(user)


def test_a_force_command_is_quoted_and_named(sshd: SshServer) -> None:
    user = sshd.setup.users["dash"]
    forced = sshd.setup.start(
        sshd.host, extra=f"Match User {user}\n  ForceCommand echo maintenance window; exit 3\n"
    )
    try:
        result = run(forced.target("dash"), HELLO)
    finally:
        forced.stop()
    assert type(result.error) is RemoteError, result.error
    assert "the far side exited with 3 before the agent started: maintenance window" in str(result.error)
    assert "ForceCommand" in str(result.error)
    assert result.exit_code == 255


def test_sudo_for_an_unknown_user_quotes_sudos_own_line(sshd: SshServer) -> None:
    result = run(f"{sshd.target('bash')}//sudo=tpnosuchuser", HELLO)
    assert isinstance(result.error, AuthenticationError), result.error
    assert "there is no user tpnosuchuser there (sudo: unknown user tpnosuchuser)" in str(result.error)
    assert result.exit_code == 255


def test_a_python_that_cannot_start_is_127(sshd: SshServer) -> None:
    with login_script(sshd, "zsh", "export PYTHONHOME=/nonexistent\n"):
        result = run(sshd.target("zsh"), HELLO)
    assert isinstance(result.error, InterpreterNotFoundError), result.error
    assert "the far side's Python does not start: " in str(result.error)
    assert "encodings" in str(result.error)  # what Python said: it found no standard library
    assert result.exit_code == 127


def test_a_process_limit_on_the_far_side_is_not_a_lost_connection(sshd: SshServer) -> None:
    with login_script(sshd, "zsh", "ulimit -u 1\n"):
        result = run(sshd.target("zsh"), HELLO)
    assert type(result.error) is RemoteError, result.error
    assert "the far side could not start the script: cannot start the script" in str(result.error)
    assert "ulimit -u" in str(result.error)
    assert result.exit_code == 126
    assert_nothing_left(sshd.setup.users["zsh"])


def test_a_segfault_gets_its_line(sshd: SshServer) -> None:
    result = run(sshd.target("fish"), "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert isinstance(result.error, RemoteExceptionError), result.error
    assert "the script died of SIGSEGV" in str(result.error)
    assert "faulthandler" in str(result.error)
    assert result.exit_code == 139


@pytest.mark.parametrize(
    ("program", "target"), [("ssh", "ssh=h"), ("docker", "docker=c"), ("kubectl", "kubectl=p")]
)
def test_a_missing_local_program_is_127_and_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, program: str, target: str
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    result = run(target, HELLO)
    assert isinstance(result.error, UnreachableError), result.error
    assert f"{program} is not installed on this machine (not found on PATH)" in str(result.error)
    assert result.exit_code == 127


@pytest.mark.parametrize("bad", [math.nan, -1, 0, "soon"])
def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(bad: object) -> None:
    with pytest.raises(UsageError, match="timeout must be a positive number of seconds"):
        run("local", "pass\n", timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="connect_timeout must be a positive number"):
        run("local", "pass\n", connect_timeout=bad)  # type: ignore[arg-type]


def test_an_infinite_timeout_means_none() -> None:
    assert run("local", "pass\n", timeout=math.inf).ok


# --- item 4, library side: where the logs and sockets go when HOME or XDG_RUNTIME_DIR cannot hold them ----

READ_ONLY_RUN = """
import json, sys
from trainprobe.errors import UsageError
from trainprobe.remote import run
from trainprobe.remote.logs import control_dir
try:
    result = run(sys.argv[1], "print('fine')\\n")
except UsageError as exc:
    print(json.dumps({"usage_error": str(exc)}))
else:
    print(json.dumps({"ok": result.ok, "log_dir": str(result.log_dir), "control": control_dir()}))
"""


def run_under_read_only_home(tmp_path: Path, target: str, **env: str) -> dict[str, object]:
    """``READ_ONLY_RUN`` in a mount namespace where HOME (XDG_RUNTIME_DIR under it) is a read-only tmpfs."""
    home = tmp_path / "home"
    home.mkdir()
    command = f'mount -t tmpfs -o ro,size=1m tmpfs {home} && exec {sys.executable} -c "$0" "$@"'
    environment = {
        "PATH": os.environ["PATH"], "HOME": str(home), "XDG_RUNTIME_DIR": str(home / "run"),
        "TMPDIR": str(tmp_path / "tmp"), **env,
    }  # fmt: skip
    (tmp_path / "tmp").mkdir()
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", command, READ_ONLY_RUN, target],
        capture_output=True, text=True, env=environment, timeout=60,
    )  # fmt: skip
    if "unshare failed" in proc.stderr or "mount:" in proc.stderr:
        pytest.skip(f"needs mount namespaces (root): {proc.stderr.strip()}")
    assert "Traceback" not in proc.stderr, proc.stderr
    return dict(json.loads(proc.stdout.splitlines()[-1]))


def test_a_read_only_home_sends_the_logs_to_tmpdir(tmp_path: Path) -> None:
    answer = run_under_read_only_home(tmp_path, f"local//python={sys.executable}")
    assert answer["ok"] is True
    assert str(answer["log_dir"]).startswith(str(tmp_path / "tmp" / f"trainprobe-runs-{os.getuid()}"))
    assert answer["control"] == f"/tmp/trainprobe-ssh-{os.getuid()}"


def test_a_runs_dir_that_cannot_be_written_is_one_usage_error(tmp_path: Path) -> None:
    answer = run_under_read_only_home(tmp_path, "local", TRAINPROBE_RUNS_DIR=str(tmp_path / "home" / "runs"))
    assert "cannot write run logs to" in str(answer["usage_error"])
    assert "set TRAINPROBE_RUNS_DIR to a writable directory" in str(answer["usage_error"])


def test_a_long_runtime_dir_falls_back_for_the_sockets(
    sshd: SshServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from trainprobe.remote.logs import MAX_CONTROL_DIR, control_dir

    runtime = tmp_path / ("r" * 80)
    runtime.mkdir()
    monkeypatch.delenv("TRAINPROBE_CONTROL_DIR")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    fallback = control_dir()
    assert fallback == f"/tmp/trainprobe-ssh-{os.getuid()}"
    result = run(sshd.target("zsh"), HELLO)
    assert result.ok, result.error
    stop = ["ssh", "-F", str(sshd.setup.ssh_config), "-o", f"ControlPath={fallback}/%C", "-O", "exit",
            "-p", str(sshd.port), "-l", sshd.setup.users["zsh"], sshd.host]  # fmt: skip
    subprocess.run(stop, capture_output=True, timeout=10)
    monkeypatch.setenv("TRAINPROBE_CONTROL_DIR", str(tmp_path / ("c" * (MAX_CONTROL_DIR + 1))))
    with pytest.raises(UsageError, match=r"TRAINPROBE_CONTROL_DIR is \d+ characters long"):
        run(sshd.target("zsh"), HELLO)


# --- item 4, library side: SIGTERM and SIGHUP stop a run like Ctrl-C, meta.json included -------------------

# SIGHUP at its default first: a suite started under nohup (or by a CI runner that ignores it) passes it on
# ignored, and a run rightly keeps an ignored SIGHUP ignored; this run stands for one started at a terminal.
SIGNALLED_RUN = """
import signal
import sys
signal.signal(signal.SIGHUP, signal.SIG_DFL)
from trainprobe.remote import run
result = run(sys.argv[1], sys.argv[2])
print(result.log_dir, flush=True)
sys.exit(result.exit_code)
"""


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_stops_the_run_and_keeps_its_record(
    sshd: SshServer, tmp_path: Path, how: signal.Signals
) -> None:
    user = sshd.setup.users["tcsh"]
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    proc = subprocess.Popen(
        [sys.executable, "-c", SIGNALLED_RUN, sshd.target("tcsh"), str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: any("sleep 300" in line for line in far_leftovers(user)), what="the script's start")
        start = time.monotonic()
        proc.send_signal(how)
        out, err = proc.communicate(timeout=15)
        elapsed = time.monotonic() - start
    finally:
        proc.kill()
        # reaped and its pipes closed: a Popen dropped while it runs fails a later test with ResourceWarnings
        proc.communicate()
        kill_user_processes(user, "sleep 300")
    assert proc.returncode == 128 + how, err
    assert "Traceback" not in err
    assert elapsed < 5 + 5  # the kill's grace, with room for a loaded machine
    meta = json.loads((Path(out.split()[-1]) / "meta.json").read_text())
    assert meta["exit_code"] == 128 + how
    assert f"stopped by {how.name}; the far side was killed" in meta["error"]["message"]
    assert_nothing_left(user)
