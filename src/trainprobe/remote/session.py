"""The local side of one run: the one place that starts processes.

It starts the argv from :mod:`trainprobe.remote.argv` in a session of its own, waits for stage 1's hello
before writing anything to the far side's stdin (a login script that reads stdin would eat the frames), then
feeds stage 1 and the agent their frames from a writer thread that keeps stdin open and sends a heartbeat
every :data:`HEARTBEAT_S` (closing stdin, or a silence of :data:`LINK_LOST_S`, is how the far side learns to
kill the run). It reads frames from stdout in the calling thread, checking each frame's kind and size,
enforces the connect timeout (until the hello, then again until the agent is ready) and the run timeout, and
keeps every byte under the run directory. Why a run failed comes from the hop that knows
(:meth:`~trainprobe.remote.hops.protocols.WrappingHop.explain_failure`), then from the bootstrap
(:func:`~trainprobe.remote.argv.explain_bootstrap_failure`). Thread-safe: each call owns its process, files
and threads.
"""

from __future__ import annotations

import contextlib
import json
import marshal
import os
import selectors
import signal
import subprocess
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from trainprobe.errors import (
    InterpreterNotFoundError,
    RemoteError,
    RemoteExceptionError,
    RemoteKilledError,
    RemoteTimeoutError,
    UnreachableError,
)
from trainprobe.remote._record import field, record
from trainprobe.remote.argv import explain_bootstrap_failure, last_words, program_frame
from trainprobe.remote.hops.base import EXIT_CONNECTION, EXIT_NO_PROGRAM
from trainprobe.remote.logs import new_run_dir

TYPE_CHECKING = False  # no typing at run time: every run imports this module
if TYPE_CHECKING:
    from typing import IO, Any

    from trainprobe.remote.target import Target

# The far side's words (trainprobe.remote._stage1 and .agent say them; a test checks both ends agree). Not
# imported from there: the agent is the far side's code, shipped as text.
MAGIC = b"\n\x00TRAINPROBE-AGENT-1\x00"
HELLO, NOT_FOUND, READY, STDOUT, STDERR, EXIT = b"H", b"F", b"R", b"1", b"2", b"X"
HEARTBEAT_FRAME = b"B\0\0\0\0"
#: the biggest frame the far side may send (an exit report holding main()'s value); more means corruption
MAX_FRAME = 1 << 30

#: after closing stdin (timeout, Ctrl-C), how long the far side gets to report before ssh is killed
STOP_GRACE_S = 5.0
#: seconds between heartbeats to the agent, and the silence after which it kills the run (the link is gone)
HEARTBEAT_S = 2.0
LINK_LOST_S = 15.0

#: exit codes of a run that did not get to finish on its own (documented in docs/remote.md)
EXIT_TIMEOUT = 124
EXIT_CANNOT_START = 126
EXIT_INTERPRETER = EXIT_NO_PROGRAM
EXIT_INTERRUPTED = 130

Sink = Callable[[bytes], None]


@record(frozen=True)
class Module:
    """A module shipped to the far side and imported from memory there."""

    name: str
    filename: str
    source: bytes
    is_package: bool = False

    def frame(self) -> bytes:
        flag = b"1" if self.is_package else b"0"
        return b"\0".join([self.name.encode(), self.filename.encode(), flag, zlib.compress(self.source)])


@record()
class RunResult:
    """What one run did. ``error`` is None when the script ran to its end (whatever its exit code)."""

    target: str
    exit_code: int
    result: Any = None
    duration: float = 0.0
    log_dir: Path | None = None
    error: RemoteError | None = None
    python: str | None = None
    host: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the script ran and exited 0."""
        return self.error is None and self.exit_code == 0

    @property
    def stdout_path(self) -> Path | None:
        return self.log_dir / "stdout" if self.log_dir else None

    @property
    def stderr_path(self) -> Path | None:
        return self.log_dir / "stderr" if self.log_dir else None

    def raise_for_error(self) -> RunResult:
        """Raise ``error`` if there is one; return self otherwise (chainable)."""
        if self.error is not None:
            raise self.error
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "exit_code": self.exit_code,
            "result": self.result,
            "duration": round(self.duration, 3),
            "log_dir": str(self.log_dir) if self.log_dir else None,
            "python": self.python,
            "host": self.host,
            "error": None
            if self.error is None
            else {"type": type(self.error).__name__, "message": str(self.error)},
        }


def _frame(kind: bytes, data: bytes) -> bytes:
    return kind + len(data).to_bytes(4, "big") + data


class _Feeder(threading.Thread):
    """Writes the frames once stage 1 said hello (``payload(far_magic)`` builds them for the far Python's
    bytecode), then a heartbeat every HEARTBEAT_S until told to stop; then closes the far side's stdin."""

    def __init__(self, pipe: IO[bytes], payload: Callable[[bytes], bytes]) -> None:
        super().__init__(daemon=True, name="trainprobe-feed")
        self.pipe = pipe
        self.payload = payload
        self.hello = threading.Event()
        self.far_magic = b""
        self.closing = threading.Event()

    def said_hello(self, far_magic: bytes) -> None:
        self.far_magic = far_magic
        self.hello.set()

    def run(self) -> None:
        try:
            while not self.hello.wait(0.5):
                if self.closing.is_set():
                    return
            if not self.closing.is_set():
                self.pipe.write(self.payload(self.far_magic))
                self.pipe.flush()
                while not self.closing.wait(HEARTBEAT_S):
                    self.pipe.write(HEARTBEAT_FRAME)
                    self.pipe.flush()
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError, ValueError):
                self.pipe.close()

    def stop(self) -> None:
        self.closing.set()


class StreamCorrupted(Exception):
    """A frame from the far side with an unknown kind or an impossible size."""


class _Frames:
    """Incremental parser of the far side's stdout: noise before the magic, then frames."""

    KINDS = frozenset((HELLO, NOT_FOUND, READY, STDOUT, STDERR, EXIT))

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.started = False
        self.noise = bytearray()

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        self.buffer += data
        if not self.started:
            at = self.buffer.find(MAGIC)
            if at < 0:
                keep = len(MAGIC) - 1
                if len(self.buffer) > keep:
                    self.noise += self.buffer[:-keep]
                    del self.buffer[:-keep]
                return []
            self.noise += self.buffer[:at]
            del self.buffer[: at + len(MAGIC)]
            self.started = True
        frames = []
        while len(self.buffer) >= 5:
            kind = bytes(self.buffer[:1])
            size = int.from_bytes(self.buffer[1:5], "big")
            if kind not in self.KINDS or size > MAX_FRAME:
                raise StreamCorrupted(f"frame {bytes(self.buffer[:5])!r}")
            if len(self.buffer) < 5 + size:
                break
            frames.append((kind, bytes(self.buffer[5 : 5 + size])))
            del self.buffer[: 5 + size]
        return frames

    def before_agent(self) -> bytes:
        """Everything the far side wrote before the agent's magic (login scripts), the last bytes too."""
        return bytes(self.noise) + (b"" if self.started else bytes(self.buffer))


class _Signalled(BaseException):
    """SIGTERM or SIGHUP arrived while a run was going (raised from the signal handler)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _StopSignals:
    """While a run goes in the main thread, SIGTERM and SIGHUP stop it like Ctrl-C does (the far side is
    killed, meta.json written) instead of ending this process on the spot. Only where nobody else handles
    them: an application's own handlers are left alone."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __enter__(self) -> _StopSignals:
        self.saved: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                if signal.getsignal(signum) is signal.SIG_DFL:
                    self.saved[signum] = signal.signal(signum, self._raise)
        return self

    @staticmethod
    def _raise(signum: int, _frame: object) -> None:
        raise _Signalled(signum)

    def __exit__(self, *_: object) -> None:
        for signum, handler in self.saved.items():
            signal.signal(signum, handler)


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to ssh and what it started in its session (a ProxyJump helper, the login of a jump host); a
    ControlMaster it started has left for a session of its own and stays."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def _wait_or_kill(proc: subprocess.Popen[bytes], grace: float) -> None:
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        _kill_session(proc)
        proc.wait()


class _Run:
    """One run's state while it goes: the process, the frames seen so far, why it was stopped."""

    def __init__(self, target: Target, timeout: float | None, connect_timeout: float) -> None:
        self.target = target
        self.name = str(target)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.start = time.monotonic()
        self.parser = _Frames()
        self.report: dict[str, Any] | None = None
        self.failure: dict[str, Any] | None = None
        self.ready: dict[str, Any] | None = None
        self.hello_at: float | None = None
        self.stop_reason: str | None = None
        self.signum = 0
        self.corrupted = ""

    def deadline(self) -> tuple[str, float] | None:
        """The next limit that would stop the run, and why."""
        if self.hello_at is None:
            return "connect", self.start + self.connect_timeout
        if self.ready is None and self.report is None and self.failure is None:
            by = self.hello_at + self.connect_timeout
            if self.timeout is None or by < self.start + self.timeout:
                return "ready", by
        return ("timeout", self.start + self.timeout) if self.timeout else None


def execute(
    target: Target,
    argv: Sequence[str],
    *,
    script: bytes,
    filename: str,
    args: Sequence[str],
    modules: Sequence[Module] = (),
    timeout: float | None = None,
    connect_timeout: float = 10.0,
    stdout: Sink | None = None,
    stderr: Sink | None = None,
    log_dir: Path | None = None,
    cancel: threading.Event | None = None,
) -> RunResult:
    """Run one script through ``argv`` (built for ``target``); every failure of the run comes back in
    ``RunResult.error``, never raised. Raises UsageError only when no run directory can be made."""
    run = _Run(target, timeout, connect_timeout)
    run_dir = Path(log_dir) if log_dir else new_run_dir(target.slug)
    if log_dir:
        run_dir.mkdir(parents=True, exist_ok=True)
    settings = target.settings
    config = {"args": list(args), "filename": filename, "timeout": timeout, "env": dict(settings.env),
              "cwd": settings.cwd, "heartbeat": LINK_LOST_S}  # fmt: skip

    def payload(far_magic: bytes) -> bytes:
        return b"".join([
            _frame(b"D", program_frame("_discovery", far_magic, with_source=False)),
            _frame(b"A", program_frame("agent", far_magic, with_source=True)),
            _frame(b"C", marshal.dumps(config, 4)),
            _frame(b"S", script),
            *(_frame(b"M", module.frame()) for module in modules),
            _frame(b"G", b""),
        ])  # fmt: skip

    meta: dict[str, Any] = {"target": run.name, "argv": list(argv), "script": filename, "args": list(args),
                            "started": time.time()}  # fmt: skip
    result = RunResult(target=run.name, exit_code=EXIT_CONNECTION, log_dir=run_dir)
    with (
        open(run_dir / "stdout", "wb") as out_file,
        open(run_dir / "stderr", "wb") as err_file,
        open(run_dir / "transport.log", "w+b") as transport,
    ):
        try:
            proc = subprocess.Popen(
                list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=transport,
                start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            result.error, result.exit_code = _cannot_start(target, argv[0], exc)
            _finish(result, meta, run.start, run_dir)
            return result
        assert proc.stdin is not None
        assert proc.stdout is not None
        feeder = _Feeder(proc.stdin, payload)
        feeder.start()
        try:
            with _StopSignals():
                _pump(run, proc, feeder, cancel, out_file, err_file, stdout, stderr, meta)
        finally:
            feeder.stop()
            _wait_or_kill(proc, 0.0 if run.stop_reason in ("connect", "ready", "corrupt") else STOP_GRACE_S)
            proc.stdout.close()
        transport.seek(0)
        before_agent = run.parser.before_agent()
        transport_text = (before_agent + transport.read()).decode("utf-8", "replace")
        if before_agent:  # what login scripts printed on stdout: kept out of the output, kept here
            transport.write(b"\n[stdout before the agent started]\n" + before_agent)
    meta["exit_status"] = proc.returncode
    _settle(run, result, proc.returncode, transport_text)
    _finish(result, meta, run.start, run_dir)
    return result


def _pump(
    run: _Run,
    proc: subprocess.Popen[bytes],
    feeder: _Feeder,
    cancel: threading.Event | None,
    out_file: IO[bytes],
    err_file: IO[bytes],
    stdout: Sink | None,
    stderr: Sink | None,
    meta: dict[str, Any],
) -> None:
    """Read the far side's frames until its stdout closes; stop the run when a limit passes."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    kill_by: float | None = None

    def stop(reason: str, now: float) -> None:
        nonlocal kill_by
        run.stop_reason = reason
        feeder.stop()  # EOF on the far side's stdin: the agent kills the run and reports
        if reason in ("connect", "ready", "corrupt"):  # nothing of ours runs there yet: no grace
            _kill_session(proc)
        kill_by = now + STOP_GRACE_S

    try:
        while True:
            now = time.monotonic()
            if run.stop_reason is None:
                limit = run.deadline()
                if limit is not None and now >= limit[1]:
                    stop(limit[0], now)
                elif cancel is not None and cancel.is_set():
                    stop("cancel", now)
            if kill_by is not None and now >= kill_by and proc.poll() is None:
                _kill_session(proc)
            wait = 0.2
            limit = run.deadline() if run.stop_reason is None else None
            for by in (limit[1] if limit else None, kill_by):
                if by is not None:
                    wait = max(0.0, min(wait, by - now))
            if not selector.select(wait):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            try:
                frames = run.parser.feed(chunk)
            except StreamCorrupted as exc:
                run.corrupted = str(exc)
                stop("corrupt", time.monotonic())
                break
            for kind, data in frames:
                if kind == STDOUT:
                    out_file.write(data)
                    if stdout is not None:
                        stdout(data)
                elif kind == STDERR:
                    err_file.write(data)
                    if stderr is not None:
                        stderr(data)
                elif kind == HELLO:
                    run.hello_at = time.monotonic()
                    meta["hello_after"] = round(run.hello_at - run.start, 4)
                    feeder.said_hello(data)
                elif kind == READY:
                    run.ready = json.loads(data)
                    meta["ready"] = run.ready
                    meta["ready_after"] = round(time.monotonic() - run.start, 4)
                elif kind == NOT_FOUND:
                    run.failure = json.loads(data)
                elif kind == EXIT:
                    run.report = json.loads(data)
                    feeder.stop()
    except KeyboardInterrupt:
        run.stop_reason = "interrupt"
    except _Signalled as exc:
        run.stop_reason, run.signum = "signal", exc.signum
    finally:
        selector.close()


def _cannot_start(target: Target, program: str, exc: OSError) -> tuple[RemoteError, int]:
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
        return UnreachableError(name, f"connection failed: {said}"), EXIT_CONNECTION
    why = f"the far side exited with {returncode} before the agent started: {said}"
    hint = "a ForceCommand or a login script may have replaced the command; see transport.log in the run log"
    return RemoteError(name, why, hint=hint), EXIT_CONNECTION


def _settle(run: _Run, result: RunResult, returncode: int | None, transport_text: str) -> None:
    """The run's outcome (exit code, error, result) from what it said and why it was stopped."""
    name, report = run.name, run.report
    if run.ready is not None:
        result.python, result.host = run.ready.get("python"), run.ready.get("host")
    if report is not None and report.get("start_error"):
        why = f"the far side could not start the script: {report['start_error']}"
        result.exit_code = int(report.get("exit_code") or EXIT_CANNOT_START)
        result.error = RemoteError(name, why, hint="a process or file limit there? (ulimit -u, ulimit -n)")
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
        tried = "; ".join(
            f"{t['python']} ({t.get('version') or '?'}) lacks {', '.join(t['missing'])}"
            for t in run.failure.get("tried", [])
        )
        result.error = InterpreterNotFoundError(
            name,
            run.failure["message"] + (f" — tried: {tried}" if tried else ""),
            hint="install the module into one of them, or name an interpreter with python=, venv= or conda=",
        )
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


_CORRUPT_HINT = "a login script that reads stdin, or an rc file that execs another shell? see transport.log"


def _stopped(run: _Run) -> tuple[RemoteError, int] | None:
    """The error of a run stopped from this side (a limit, Ctrl-C, cancel, a signal), else None."""
    name, reason = run.name, run.stop_reason
    if reason == "connect":
        why = f"no answer within the connect timeout ({run.connect_timeout:g} s)"
        hint = ("the host may be down or filtered, or a login script hangs, reads stdin or execs a shell; "
                "try a longer --connect-timeout")  # fmt: skip
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


def _finish(result: RunResult, meta: dict[str, Any], start: float, run_dir: Path) -> None:
    result.duration = time.monotonic() - start
    meta.update(result.to_json())
    if result.error is not None and isinstance(result.error, RemoteExceptionError):
        meta["remote_traceback"] = result.error.remote_traceback
    with contextlib.suppress(OSError):
        (run_dir / "meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
        (run_dir / "result.json").write_text(json.dumps(result.result, default=str) + "\n")
