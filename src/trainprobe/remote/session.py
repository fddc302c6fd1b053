"""The local side of one run: the one place that starts processes.

It starts the argv from :mod:`trainprobe.remote.argv`, feeds stage 1 and the agent their frames on stdin
(from a
writer thread, keeping stdin open: closing it is how the far side learns to kill the run), reads frames from
stdout
in the calling thread, enforces the connect timeout (until stage 1's hello) and the run timeout, and keeps
every
byte under the run directory. Thread-safe: each call owns its process, files and threads.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from trainprobe.errors import (
    AuthenticationError,
    InterpreterNotFoundError,
    RemoteError,
    RemoteExceptionError,
    RemoteKilledError,
    RemoteTimeoutError,
    TargetSyntaxError,
    UnreachableError,
)
from trainprobe.remote._record import field, record
from trainprobe.remote.argv import agent_source
from trainprobe.remote.logs import new_run_dir

# The far side's words (trainprobe.remote._stage1 and .agent say them; a test checks both ends agree). Not
# imported from there: they pull in ast, shutil and friends, which this side does not need at startup.
MAGIC = b"\n\x00TRAINPROBE-AGENT-1\x00"
HELLO, NOT_FOUND, READY, STDOUT, STDERR, EXIT = b"H", b"F", b"R", b"1", b"2", b"X"

#: after closing stdin (timeout, Ctrl-C), how long the far side gets to report before ssh is killed
STOP_GRACE_S = 5.0

#: exit codes of a run that did not get to finish on its own (documented in docs/remote.md)
EXIT_TIMEOUT = 124
EXIT_INTERPRETER = 127
EXIT_INTERRUPTED = 130
EXIT_CONNECTION = 255

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
    """Writes the frames to the far side, then holds stdin open until told to close it."""

    def __init__(self, pipe: IO[bytes], payload: bytes) -> None:
        super().__init__(daemon=True, name="trainprobe-feed")
        self.pipe = pipe
        self.payload = payload
        self.closing = threading.Event()

    def run(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.pipe.write(self.payload)
            self.pipe.flush()
            self.closing.wait()
        with contextlib.suppress(OSError, ValueError):
            self.pipe.close()


class _Frames:
    """Incremental parser of the far side's stdout: noise before the magic, then frames."""

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
            size = int.from_bytes(self.buffer[1:5], "big")
            if len(self.buffer) < 5 + size:
                break
            frames.append((bytes(self.buffer[:1]), bytes(self.buffer[5 : 5 + size])))
            del self.buffer[: 5 + size]
        return frames


def transport_error(target: str, returncode: int | None, transport_log: str) -> RemoteError:
    """Turn what ssh, the container/cluster tools and the login shell said (and the exit status) into one
    clear error."""
    text = transport_log.strip()
    explained = hop_failure(target, text)
    if explained is not None:  # a stopped container, an ended job: the hop's tool knows best
        return explained
    last = text.splitlines()[-1] if text else ""
    lowered = text.lower()
    if "permission denied" in lowered or "too many authentication failures" in lowered:
        return AuthenticationError(
            target,
            f"authentication refused: {last}",
            hint="check the user, keys (ssh-add -l) and ~/.ssh/config",
        )
    if "sudo:" in lowered and "password is required" in lowered:
        return AuthenticationError(
            target,
            "sudo refused: a password is required (trainprobe runs sudo -n, which never prompts)",
            hint="allow this user NOPASSWD in sudoers, or connect as the target user",
        )
    if "host key verification failed" in lowered:
        return AuthenticationError(target, "host key verification failed", hint="check ~/.ssh/known_hosts")
    unreachable = (
        "could not resolve", "connection refused", "no route to host", "timed out",
        "network is unreachable", "connection closed", "kex_exchange", "connection reset",
    )  # fmt: skip
    if any(word in lowered for word in unreachable):
        return UnreachableError(target, f"unreachable: {last}", hint="check the host name, port and network")
    if "syntaxerror" in lowered:
        return InterpreterNotFoundError(
            target,
            f"the far-side Python is too old for trainprobe's agent (it needs 3.7 or newer): {last}",
            hint="name a newer interpreter with python=, venv= or conda=",
        )
    if returncode == EXIT_INTERPRETER:
        return InterpreterNotFoundError(
            target,
            f"no Python interpreter on the far side: {last or 'exit 127'}",
            hint="name one with python=PATH",
        )
    if returncode == EXIT_CONNECTION:
        return UnreachableError(target, f"connection failed: {last or 'ssh exited 255'}")
    return RemoteError(
        target, f"the far side exited with {returncode} before the agent started: {last or 'no message'}"
    )


def hop_failure(target: str, transport_log: str) -> UnreachableError | None:
    """The innermost container/cluster hop that recognises its tool's message in ``transport_log``
    (``explain_failure``, e.g. docker's "is not running") turned into an UnreachableError."""
    from trainprobe.remote.target import parse_target  # only on this error path: keeps start-up lean

    try:
        hops = parse_target(target).wrapping
    except TargetSyntaxError:
        return None
    for hop in reversed(hops):
        explain = getattr(hop, "explain_failure", None)
        found: tuple[str, str] | None = explain(transport_log) if explain is not None else None
        if found is not None:
            return UnreachableError(target, found[0], hint=found[1])
    return None


def execute(
    argv: Sequence[str],
    target: str,
    *,
    script: bytes,
    filename: str,
    args: Sequence[str],
    settings_env: dict[str, str],
    cwd: str | None,
    modules: Sequence[Module] = (),
    timeout: float | None = None,
    connect_timeout: float = 10.0,
    stdout: Sink | None = None,
    stderr: Sink | None = None,
    log_dir: Path | None = None,
    slug: str = "run",
    cancel: threading.Event | None = None,
) -> RunResult:
    """Run one script through ``argv``; every failure comes back in ``RunResult.error``, never raised."""
    start = time.monotonic()
    run_dir = Path(log_dir) if log_dir else new_run_dir(slug)
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {"args": list(args), "filename": filename, "timeout": timeout, "env": settings_env, "cwd": cwd}
    payload = b"".join([
        _frame(b"A", agent_source()),
        _frame(b"C", json.dumps(config).encode()),
        _frame(b"S", script),
        *(_frame(b"M", module.frame()) for module in modules),
        _frame(b"G", b""),
    ])  # fmt: skip
    meta: dict[str, Any] = {"target": target, "argv": list(argv), "script": filename, "args": list(args),
                            "started": time.time()}  # fmt: skip
    result = RunResult(target=target, exit_code=EXIT_CONNECTION, log_dir=run_dir)
    with (
        open(run_dir / "stdout", "wb") as out_file,
        open(run_dir / "stderr", "wb") as err_file,
        open(run_dir / "transport.log", "w+b") as transport,
    ):
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=transport,
                start_new_session=True,
            )
        except OSError as exc:
            result.exit_code = EXIT_INTERPRETER if isinstance(exc, FileNotFoundError) else EXIT_CONNECTION
            result.error = (InterpreterNotFoundError if isinstance(exc, FileNotFoundError) else RemoteError)(
                target, f"cannot start {argv[0]}: {exc.strerror or exc}"
            )
            _finish(result, meta, start, run_dir)
            return result
        assert proc.stdin is not None
        assert proc.stdout is not None
        feeder = _Feeder(proc.stdin, payload)
        feeder.start()
        parser = _Frames()
        report: dict[str, Any] | None = None
        failure: dict[str, Any] | None = None
        hello_by = start + connect_timeout
        deadline = start + timeout if timeout else None
        stop_reason: str | None = None
        kill_by: float | None = None
        fd = proc.stdout.fileno()
        selector = selectors.DefaultSelector()
        selector.register(fd, selectors.EVENT_READ)
        try:
            while True:
                now = time.monotonic()
                if stop_reason is None:
                    if not parser.started and now >= hello_by:
                        stop_reason = "connect"
                    elif deadline is not None and now >= deadline:
                        stop_reason = "timeout"
                    elif cancel is not None and cancel.is_set():
                        stop_reason = "cancel"
                    if stop_reason is not None:
                        feeder.closing.set()  # EOF on the far side's stdin: the agent kills the run
                        kill_by = now + (0 if stop_reason == "connect" else STOP_GRACE_S)
                if kill_by is not None and now >= kill_by and proc.poll() is None:
                    proc.kill()
                wait = 0.2
                pending = (hello_by if not parser.started else None, deadline) if stop_reason is None else ()
                for limit in (*pending, kill_by):
                    if limit is not None:
                        wait = max(0.0, min(wait, limit - now))
                if not selector.select(wait):
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                for kind, data in parser.feed(chunk):
                    if kind == STDOUT:
                        out_file.write(data)
                        if stdout is not None:
                            stdout(data)
                    elif kind == STDERR:
                        err_file.write(data)
                        if stderr is not None:
                            stderr(data)
                    elif kind == READY:
                        ready = json.loads(data)
                        result.python, result.host = ready.get("python"), ready.get("host")
                        meta["ready"] = ready
                        meta["ready_after"] = round(time.monotonic() - start, 4)
                    elif kind == HELLO:
                        meta["hello_after"] = round(time.monotonic() - start, 4)
                    elif kind == NOT_FOUND:
                        failure = json.loads(data)
                    elif kind == EXIT:
                        report = json.loads(data)
                        feeder.closing.set()
        except KeyboardInterrupt:
            stop_reason = "interrupt"
            feeder.closing.set()
            _wait_or_kill(proc, STOP_GRACE_S)
        finally:
            selector.close()
            feeder.closing.set()
            _wait_or_kill(proc, STOP_GRACE_S)
            proc.stdout.close()
        transport.seek(0)
        transport_text = (parser.noise + transport.read()).decode("utf-8", "replace")
        if parser.noise:  # what login scripts printed on stdout: kept out of the output, kept here
            transport.write(b"\n[stdout before the agent started]\n" + bytes(parser.noise))
    meta["exit_status"] = proc.returncode
    _settle(result, report, failure, stop_reason, proc.returncode, transport_text, target,
            connect_timeout, timeout)  # fmt: skip
    _finish(result, meta, start, run_dir)
    return result


def _wait_or_kill(proc: subprocess.Popen[bytes], grace: float) -> None:
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _settle(
    result: RunResult,
    report: dict[str, Any] | None,
    failure: dict[str, Any] | None,
    stop_reason: str | None,
    returncode: int | None,
    transport_text: str,
    target: str,
    connect_timeout: float,
    timeout: float | None,
) -> None:
    if report is not None:
        result.result = report.get("result")
        result.exit_code = int(report.get("exit_code", 1))
        result.extra["report"] = report
        exception = report.get("exception")
        if report.get("timed_out") or stop_reason == "timeout":
            result.exit_code = EXIT_TIMEOUT
            result.error = RemoteTimeoutError(
                target, f"timed out after {timeout:g} s; the far side was killed"
            )
        elif stop_reason in ("interrupt", "cancel"):
            result.exit_code = EXIT_INTERRUPTED
            result.error = RemoteKilledError(target, "interrupted; the far side was killed")
        elif report.get("killed"):
            result.exit_code = EXIT_CONNECTION
            result.error = RemoteKilledError(target, "the connection was lost; the far side was killed")
        elif exception:
            result.error = RemoteExceptionError(
                target,
                f"{exception['type']}: {exception['message']}",
                remote_traceback=exception.get("traceback", ""),
            )
        return
    if failure is not None:
        result.exit_code = EXIT_INTERPRETER
        tried = "; ".join(
            f"{t['python']} ({t.get('version') or '?'}) lacks {', '.join(t['missing'])}"
            for t in failure.get("tried", [])
        )
        result.error = InterpreterNotFoundError(
            target,
            failure["message"] + (f" — tried: {tried}" if tried else ""),
            hint="install the module into one of them, or name an interpreter with python=, venv= or conda=",
        )
        result.extra["tried"] = failure.get("tried", [])
        return
    if stop_reason == "connect":
        result.exit_code = EXIT_CONNECTION
        result.error = UnreachableError(
            target,
            f"no answer within the connect timeout ({connect_timeout:g} s)",
            hint="the host may be down or filtered, or login scripts hang; try a longer --connect-timeout",
        )
    elif stop_reason == "timeout":
        result.exit_code = EXIT_TIMEOUT
        result.error = RemoteTimeoutError(target, f"timed out after {timeout:g} s; the far side was killed")
    elif stop_reason in ("interrupt", "cancel"):
        result.exit_code = EXIT_INTERRUPTED
        result.error = RemoteKilledError(target, "interrupted; the far side was killed")
    elif result.python is not None:
        result.exit_code = EXIT_CONNECTION
        result.error = RemoteKilledError(
            target, "the connection was lost mid-run; the far side kills the run"
        )
    else:
        result.error = transport_error(target, returncode, transport_text)
        no_python = isinstance(result.error, InterpreterNotFoundError)
        result.exit_code = EXIT_INTERPRETER if no_python else EXIT_CONNECTION


def _finish(result: RunResult, meta: dict[str, Any], start: float, run_dir: Path) -> None:
    result.duration = time.monotonic() - start
    meta.update(result.to_json())
    if result.error is not None and isinstance(result.error, RemoteExceptionError):
        meta["remote_traceback"] = result.error.remote_traceback
    with contextlib.suppress(OSError):
        (run_dir / "meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
        (run_dir / "result.json").write_text(json.dumps(result.result, default=str) + "\n")
