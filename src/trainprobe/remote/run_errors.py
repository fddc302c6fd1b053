"""Why a run ended as it did: its :class:`~trainprobe.remote.session.RunResult`'s error and exit code, from
what the far side reported, why the local side stopped it, and — when the agent never started — what the
tools said (the hop that knows, then the bootstrap). Pure: nothing here starts a process or reads a file.
"""

from __future__ import annotations

import signal
import time

from trainprobe.errors import (
    InterpreterNotFoundError,
    RemoteError,
    RemoteExceptionError,
    RemoteKilledError,
    RemoteTimeoutError,
    UnreachableError,
)
from trainprobe.remote.argv import explain_bootstrap_failure, last_words
from trainprobe.remote.hops.records import EXIT_CONNECTION, EXIT_NO_PROGRAM

TYPE_CHECKING = False  # no typing at run time: every run imports this module
if TYPE_CHECKING:
    from typing import Any, Protocol

    from trainprobe.remote.target import Target

    class RunResult(Protocol):
        """What :func:`settle` fills in: the fields of :class:`trainprobe.remote.session.RunResult`, named
        here, not imported (the session imports this module)."""

        exit_code: int
        result: Any
        error: RemoteError | None
        python: str | None
        host: str | None
        extra: dict[str, Any]


#: exit codes of a run that did not get to finish on its own (documented in docs/remote.md)
EXIT_TIMEOUT = 124
EXIT_CANNOT_START = 126
EXIT_INTERPRETER = EXIT_NO_PROGRAM
EXIT_INTERRUPTED = 130
#: the silence after which the agent kills the run (the session sends heartbeats more often than this)
LINK_LOST_S = 15.0


class RunState:
    """One run's state while it goes: the frames seen so far, why it was stopped."""

    def __init__(self, target: Target, timeout: float | None, connect_timeout: float) -> None:
        self.target = target
        self.name = str(target)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.start = time.monotonic()
        self.report: dict[str, Any] | None = None
        self.failure: dict[str, Any] | None = None
        self.ready: dict[str, Any] | None = None
        self.hello_at: float | None = None
        self.stop_reason: str | None = None
        self.signum = 0
        self.corrupted = ""
        #: after a connect timeout through ssh: whether ssh was logged in to the host (None: unknown)
        self.logged_in: bool | None = None

    def deadline(self) -> tuple[str, float] | None:
        """The next limit that would stop the run, and why."""
        if self.hello_at is None:
            return "connect", self.start + self.connect_timeout
        if self.ready is None and self.report is None and self.failure is None:
            by = self.hello_at + self.connect_timeout
            if self.timeout is None or by < self.start + self.timeout:
                return "ready", by
        return ("timeout", self.start + self.timeout) if self.timeout else None


def cannot_start(target: Target, program: str, exc: OSError) -> tuple[RemoteError, int]:
    """The local program of the outermost hop (ssh, docker, kubectl, srun...), or for a local target the
    interpreter itself, would not start."""
    name = str(target)
    if all(hop.kind == "local" for hop in target.wrapping):  # the bootstrap itself: python= or sh
        why = f"no Python interpreter at {program}" if program != "sh" else "no sh on this machine"
        hint = "name an existing one with python=, venv= or conda="
        return InterpreterNotFoundError(name, f"{why} ({exc.strerror})", hint=hint), EXIT_INTERPRETER
    if isinstance(exc, FileNotFoundError):
        why = f"{program} is not installed on this machine (not found on PATH)"
        return UnreachableError(name, why, hint=f"install {program}, or add its directory to PATH"), 127
    if isinstance(exc, PermissionError):
        why = f"cannot run {program} here: {exc.strerror}"
        return UnreachableError(name, why, hint=f"check the permissions of {program}"), EXIT_CANNOT_START
    why = f"cannot start {program}: {exc.strerror or exc}"
    return RemoteError(name, why, hint="a process limit on this machine? (ulimit -u)"), EXIT_CONNECTION


def explain_transport(target: Target, returncode: int | None, transport_log: str) -> tuple[RemoteError, int]:
    """What ssh, the container/cluster tools and the login shell said before the agent started, as one error
    and the run's exit code: the innermost hop that recognises its tool's words, then the bootstrap, else
    the far side's exit status with the last line worth quoting."""
    name = str(target)
    for hop in reversed(target.wrapping):
        found = hop.explain_failure(transport_log, returncode)
        if found is not None:
            return found.to_error(name), found.exit_code
    found = explain_bootstrap_failure(transport_log, returncode)
    if found is not None:
        return found.to_error(name), found.exit_code
    said = last_words(transport_log) or "no message"
    if returncode == EXIT_CONNECTION:
        hint = "check the host, port and network; what the tools said is in transport.log of the run log"
        return UnreachableError(name, f"connection failed: {said}", hint=hint), EXIT_CONNECTION
    why = f"the far side exited with {returncode} before the agent started: {said}"
    hint = "a ForceCommand or a login script may have replaced the command; see transport.log in the run log"
    return RemoteError(name, why, hint=hint), EXIT_CONNECTION


def settle(run: RunState, result: RunResult, returncode: int | None, transport_text: str) -> None:
    """The run's outcome (exit code, error, result) from what it said and why it was stopped."""
    name, report = run.name, run.report
    if run.ready is not None:
        result.python, result.host = run.ready.get("python"), run.ready.get("host")
    if report is not None and report.get("start_error"):
        why = f"the far side could not start the script: {report['start_error']}"
        result.exit_code = int(report.get("exit_code") or EXIT_CANNOT_START)
        limits = "a process or file limit there? (ulimit -u, ulimit -n)"
        hint = limits if result.exit_code == EXIT_CANNOT_START else _CORRUPT_HINT
        result.error = RemoteError(name, why, hint=hint)
        return
    stopped = _stopped(run)
    if report is not None:
        result.result = report.get("result")
        result.exit_code = int(report.get("exit_code", 1))
        result.extra["report"] = report
        exception = report.get("exception")
        if stopped is not None:
            result.error, result.exit_code = stopped
        elif report.get("killed"):
            result.exit_code = EXIT_CONNECTION
            why = f"the link went silent for {LINK_LOST_S:g} s; the far side killed the run"
            result.error = RemoteKilledError(name, why, hint="check the network to the target")
        elif exception:
            why, traceback = f"{exception['type']}: {exception['message']}", exception.get("traceback", "")
            result.error = RemoteExceptionError(name, why, remote_traceback=traceback)
        elif report.get("signal"):
            result.error = _died_of_signal(name, int(report["signal"]))
        return
    if run.failure is not None:
        if run.failure.get("error") == "corrupt":
            result.error = RemoteError(name, run.failure["message"], hint=_CORRUPT_HINT)
            return
        result.exit_code = EXIT_INTERPRETER
        result.error = _no_interpreter(run, run.failure)
        result.extra["tried"] = run.failure.get("tried", [])
        return
    if stopped is not None:
        result.error, result.exit_code = stopped
    elif run.ready is not None:
        lost = next(
            (f for hop in run.target.wrapping if (f := hop.explain_failure(transport_text, returncode))), None
        )
        if lost is not None:
            why = (f"the connection was lost mid-run ({lost.reason}); the far side kills the run once "
                   f"{LINK_LOST_S:g} s pass without a heartbeat")  # fmt: skip
            result.error = RemoteKilledError(name, why, hint="check the network to the target")
        else:  # the channel closed in order, without a report: the agent itself was killed
            why = (f"the far side's agent ended without a report (exit status {returncode}); its guard "
                   "killed the script's process group")  # fmt: skip
            hint = "killed from outside (the OOM killer? an admin?); the script's output so far is in the log"
            result.error = RemoteKilledError(name, why, hint=hint)
        result.exit_code = EXIT_CONNECTION
    else:
        result.error, result.exit_code = explain_transport(run.target, returncode, transport_text)


def _no_interpreter(run: RunState, failure: dict[str, Any]) -> InterpreterNotFoundError:
    """Stage 1 found no interpreter to run the agent: its Python is too old, the named one is not there, or
    none has the ``--need`` modules (each candidate and what it lacked)."""
    find_one = "install Python 3.7 or newer there, or name one with python=, venv= or conda="
    if failure.get("error") == "old":  # stage 1 ran under a Python older than the agent's floor
        return InterpreterNotFoundError(run.name, f"no usable Python: {failure['message']}", hint=find_one)
    tried = "; ".join(
        f"{t['python']} ({t.get('version') or '?'}) lacks {', '.join(t['missing'])}"
        for t in failure.get("tried", [])
    )
    settings = run.target.settings
    if tried:
        hint = "install the module into one of them, or name an interpreter with python=, venv= or conda="
    elif settings.python or settings.venv or settings.conda:  # the one named is not there
        hint = "check the path, or name another interpreter with python=, venv= or conda="
    else:
        hint = find_one
    return InterpreterNotFoundError(
        run.name, failure["message"] + (f" — tried: {tried}" if tried else ""), hint=hint
    )


_CORRUPT_HINT = "a login script that reads stdin, or an rc file that execs another shell? see transport.log"


def _stopped(run: RunState) -> tuple[RemoteError, int] | None:
    """The error of a run stopped from this side (a limit, Ctrl-C, cancel, a signal), else None."""
    name, reason = run.name, run.stop_reason
    if reason == "connect":
        why = f"no answer within the connect timeout ({run.connect_timeout:g} s)"
        check = ("check with `ssh HOST true </dev/null`: if that works, a login script reads stdin or "
                 "execs another shell (guard it with `[ -t 0 ]` or `case $- in *i*)`); if it hangs too, a "
                 "login script hangs; else raise --connect-timeout")  # fmt: skip
        if run.logged_in:
            why += (": ssh logged in to the host, but its login shell did not start trainprobe's command "
                    "(a login script there hangs, reads stdin or execs another shell; one that sleeps runs "
                    "to its end, as sshd signals nothing to a session without a terminal)")  # fmt: skip
            return UnreachableError(name, why, hint=check), EXIT_CONNECTION
        hint = ("the host may be down or filtered, or a login script hangs, reads stdin or execs a shell; "
                + check)  # fmt: skip
        return UnreachableError(name, why, hint=hint), EXIT_CONNECTION
    if reason == "ready":
        why = f"the far side's Python started but the agent was not ready within {run.connect_timeout:g} s"
        return UnreachableError(name, why, hint=_CORRUPT_HINT), EXIT_CONNECTION
    if reason == "corrupt":
        why = f"the stream from the far side was corrupted ({run.corrupted})"
        return RemoteError(name, why, hint=_CORRUPT_HINT), EXIT_CONNECTION
    if reason == "timeout" or (run.report or {}).get("timed_out"):
        why = f"timed out after {run.timeout:g} s; the far side was killed"
        return RemoteTimeoutError(name, why), EXIT_TIMEOUT
    if reason in ("interrupt", "cancel"):
        return RemoteKilledError(name, "interrupted; the far side was killed"), EXIT_INTERRUPTED
    if reason == "signal":
        what = signal.Signals(run.signum).name
        return RemoteKilledError(name, f"stopped by {what}; the far side was killed"), 128 + run.signum
    return None


def _died_of_signal(name: str, signum: int) -> RemoteError:
    try:
        what = signal.Signals(signum).name
    except ValueError:
        what = f"signal {signum}"
    hint = "a crash in native code (see the script's stderr; python -X faulthandler shows where)"
    if what == "SIGKILL":
        hint = "killed from outside: the kernel's out-of-memory killer? (dmesg on the far side)"
    return RemoteExceptionError(name, f"the script died of {what}", hint=hint)
