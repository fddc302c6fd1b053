"""The local side of one run: the one place that starts processes.

It starts the argv from :mod:`trainprobe.remote.argv` in a session of its own, waits for stage 1's hello
before writing anything to the far side's stdin (a login script that reads stdin would eat the frames), then
feeds stage 1 and the agent their frames (:mod:`trainprobe.remote.frames`) from a writer thread that keeps
stdin open and sends a heartbeat every ``HEARTBEAT_S`` (closing stdin, or a silence of ``LINK_LOST_S``, is how
the far side learns to kill the run). It reads frames from stdout in the calling thread, checking each frame's
kind and size, enforces the connect timeout (until the hello, then again until the agent is ready) and the run
timeout, and keeps every byte under the run directory. Why a run failed comes from the hop that knows
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

from trainprobe.errors import RemoteError, RemoteExceptionError, UsageError
from trainprobe.remote import frames, run_errors
from trainprobe.remote._discovery import names_home
from trainprobe.remote._record import field, record
from trainprobe.remote._script_runner import DISCOVERY
from trainprobe.remote.far_code import LOCAL_MAGIC, module_code, program_frame
from trainprobe.remote.frames import EXIT, HELLO, NOT_FOUND, READY, STDERR, STDOUT, Feeder, FrameParser, frame
from trainprobe.remote.hops.records import EXIT_CONNECTION
from trainprobe.remote.logs import new_run_dir
from trainprobe.remote.run_errors import RunState, cannot_start, settle

#: seconds to connect, authenticate and get through login scripts: the one default of every run, call, fleet
#: and task (and of the CLI's --connect-timeout: trainprobe.cli._where.CONNECT_TIMEOUT_S, held equal by a
#: test); a login that runs conda's hooks or a slow LDAP lookup takes several seconds
CONNECT_TIMEOUT_S = 20.0

TYPE_CHECKING = False  # no typing at run time: every run imports this module
if TYPE_CHECKING:
    from typing import IO, Any

    from trainprobe.remote.target import Target

#: after closing stdin (timeout, Ctrl-C), how long the far side gets to report before ssh is killed
STOP_GRACE_S = 5.0


Sink = Callable[[bytes], None]


@record(frozen=True)
class Module:
    """A module shipped to the far side and imported from memory there."""

    name: str
    filename: str
    source: bytes
    is_package: bool = False

    def frame(self, far_magic: bytes = b"") -> bytes:
        """``name\\0filename\\0flag\\0`` then ``magic codelen zlib(code) zlib(source)``: the code object
        goes when the far Python's bytecode magic number is this one's (compiling a shipped package there
        costs more than sending it); the agent takes it only if the magic is its own."""
        flag = b"1" if self.is_package else b"0"
        code = zlib.compress(module_code(self.filename, self.source), 6) if far_magic == LOCAL_MAGIC else b""
        head = b"\0".join([self.name.encode(), self.filename.encode(), flag, b""])
        return head + LOCAL_MAGIC + len(code).to_bytes(4, "big") + code + zlib.compress(self.source)


#: the far side's discovery, as ``probe``'s script and every script that expands ``~`` import it there (the
#: script runner's name for it: ``cd=`` expands with it)
DISCOVERY_MODULE = DISCOVERY


def with_discovery(modules: Sequence[Module]) -> list[Module]:
    """``modules`` and :mod:`trainprobe.remote._discovery` as :data:`DISCOVERY_MODULE`: ``probe`` lists the
    discovery order with it, and the forked script expands ``~`` and ``$HOME`` with its ``expand_home``
    (``cd=``, the path arguments of a task), the one home of the far side."""
    if any(m.name == DISCOVERY_MODULE for m in modules):
        return list(modules)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_discovery.py")
    with open(path, "rb") as f:
        return [*modules, Module(DISCOVERY_MODULE, path, f.read())]


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


def _logged_in(argv: Sequence[str]) -> bool | None:
    """After a connect timeout through ssh: is ssh logged in to the host (its ControlMaster answers)? Then the
    host is fine and what hung is the login shell there. None when nobody can tell (no ControlMaster)."""
    from trainprobe.remote.hops.ssh import SshHop

    check = SshHop.control_check(argv)
    if check is None:
        return None
    try:
        done = subprocess.run(check, stdin=subprocess.DEVNULL, capture_output=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.returncode == 0


def _wait_or_kill(proc: subprocess.Popen[bytes], grace: float) -> None:
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        _kill_session(proc)
        proc.wait()


def execute(
    target: Target,
    argv: Sequence[str],
    *,
    script: bytes,
    filename: str,
    args: Sequence[str],
    modules: Sequence[Module] = (),
    timeout: float | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    stdout: Sink | None = None,
    stderr: Sink | None = None,
    log_dir: Path | None = None,
    cancel: threading.Event | None = None,
) -> RunResult:
    """Run one script through ``argv`` (built for ``target``); every failure of the run comes back in
    ``RunResult.error``, never raised. Raises UsageError only when no run directory can be made."""
    run = RunState(target, timeout, connect_timeout)
    parser = FrameParser()
    run_dir = _run_dir(target, log_dir)
    settings = target.settings
    if settings.cwd and names_home(settings.cwd):  # expanded by the script's side with discovery's home
        modules = with_discovery(modules)
    config = {"args": list(args), "filename": filename, "timeout": timeout, "env": dict(settings.env),
              "cwd": settings.cwd, "heartbeat": run_errors.LINK_LOST_S}  # fmt: skip

    def payload(far_magic: bytes) -> bytes:
        return b"".join([
            frame(b"D", program_frame("_discovery", far_magic, with_source=False)),
            frame(b"A", program_frame("agent", far_magic, with_source=True)),
            frame(b"C", marshal.dumps(config, 4)),
            frame(b"S", script),
            frame(b"U", program_frame("_script_runner", far_magic, with_source=True)),
            *(frame(b"M", module.frame(far_magic)) for module in modules),
            frame(b"G", b""),
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
            result.error, result.exit_code = cannot_start(target, argv[0], exc)
            _finish(result, meta, run.start, run_dir)
            return result
        assert proc.stdin is not None
        assert proc.stdout is not None
        feeder = Feeder(proc.stdin, payload)
        feeder.start()
        try:
            with _StopSignals():
                _pump(run, parser, proc, feeder, cancel, _Output(out_file, err_file, stdout, stderr), meta)
        finally:
            feeder.stop()
            _wait_or_kill(proc, 0.0 if run.stop_reason in ("connect", "ready", "corrupt") else STOP_GRACE_S)
            proc.stdout.close()
        if run.stop_reason == "connect":
            run.logged_in = _logged_in(argv)
        transport.seek(0)
        before_agent = parser.before_agent()
        transport_text = (before_agent + transport.read()).decode("utf-8", "replace")
        if before_agent:  # what login scripts printed on stdout: kept out of the output, kept here
            transport.write(b"\n[stdout before the agent started]\n" + before_agent)
    meta["exit_status"] = proc.returncode
    settle(run, result, proc.returncode, transport_text)
    _finish(result, meta, run.start, run_dir)
    return result


def _run_dir(target: Target, log_dir: Path | None) -> Path:
    """The run's directory: the one asked for (made if missing), else a new one under the runs' root."""
    if not log_dir:
        return new_run_dir(target.slug)
    run_dir = Path(log_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the log directory {run_dir}: {exc.strerror}") from None
    return run_dir


class _Output:
    """Where the script's stdout and stderr go: the run directory's files, and the caller's sinks if any."""

    def __init__(self, out_file: IO[bytes], err_file: IO[bytes], stdout: Sink | None, stderr: Sink | None):
        self.files = {STDOUT: out_file, STDERR: err_file}
        self.sinks = {STDOUT: stdout, STDERR: stderr}

    def write(self, kind: bytes, data: bytes) -> None:
        self.files[kind].write(data)
        sink = self.sinks[kind]
        if sink is not None:
            sink(data)


def _take(
    run: RunState, feeder: Feeder, output: _Output, meta: dict[str, Any], kind: bytes, data: bytes
) -> None:
    """One frame from the far side."""
    if kind in (STDOUT, STDERR):
        output.write(kind, data)
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


def _pump(
    run: RunState,
    parser: FrameParser,
    proc: subprocess.Popen[bytes],
    feeder: Feeder,
    cancel: threading.Event | None,
    output: _Output,
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
                got = parser.feed(chunk)
            except frames.StreamCorrupted as exc:
                run.corrupted = str(exc)
                stop("corrupt", time.monotonic())
                break
            for kind, data in got:
                _take(run, feeder, output, meta, kind, data)
    except KeyboardInterrupt:
        run.stop_reason = "interrupt"
    except _Signalled as exc:
        run.stop_reason, run.signum = "signal", exc.signum
    finally:
        selector.close()


def _finish(result: RunResult, meta: dict[str, Any], start: float, run_dir: Path) -> None:
    result.duration = time.monotonic() - start
    meta.update(result.to_json())
    if result.error is not None and isinstance(result.error, RemoteExceptionError):
        meta["remote_traceback"] = result.error.remote_traceback
    with contextlib.suppress(OSError):
        (run_dir / "meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
        (run_dir / "result.json").write_text(json.dumps(result.result, default=str) + "\n")
