"""The far-side agent: runs one user script in a child process group and streams everything back in frames.

Shipped over stdin (as code, or source for another Python version) to stage 1
(:mod:`trainprobe.remote._stage1`) and started with :func:`serve`; it
uses only the standard library, runs on Python 3.7 or newer, and on the common path imports only built-in
modules (``json``, ``re``, ``selectors``, ``signal`` and ``linecache`` would cost every run milliseconds: the
result is JSON-encoded only when ``main()`` returned something, tracebacks import what they need). Importing
this module locally is harmless (the local side takes the frame constants from here, so both ends agree).

Frames, both ways: one type byte, a 4-byte big-endian length, the data.

local → far, written only after stage 1's hello: ``D`` discovery and ``A`` the agent (read by stage 1),
``C`` config (a :mod:`marshal`-ed dict: args, filename, timeout, env, cwd, heartbeat), ``S`` the script's
bytes, ``U`` the script runner (:mod:`trainprobe.remote._script_runner`, which the child runs: a program
frame as ``D`` and ``A`` are), ``M`` a module to import from memory (``name\\0filename\\0is_package\\0`` then
``magic codelen zlib(code) zlib(source)``: the code is used when ``magic`` is this interpreter's), ``G`` go;
then ``B`` heartbeats until the run ends. Missing heartbeats for ``heartbeat`` seconds, or EOF on stdin,
mean the link was lost or the local side gave up, and the run is killed.

far → local (after the magic line of stage 1): ``H`` hello (the far Python's bytecode magic number), ``F``
interpreter not found (JSON), ``R`` ready
(JSON), ``1``/``2`` stdout/stderr bytes, ``X`` exit (JSON: exit_code, signal, result, exception, timed_out,
killed, start_error). The far side never sends marshal: the local side parses only JSON from it.
"""

import _signal  # type: ignore[import-not-found]  # signal itself imports enum: milliseconds a run
import gc
import marshal
import os
import pwd
import select
import sys
import time
import zlib

# Not `from typing import ...` at run time: typing costs the far side a few milliseconds on every run, and
# here it only names types in annotations (strings, under the __future__ import above).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import types
    from collections.abc import Callable
    from typing import Any

STDOUT, STDERR, READY, EXIT = b"1", b"2", b"R", b"X"
#: the frames the local side may send after ``G``
HEARTBEAT = b"B"
CHUNK = 1 << 16
#: seconds between SIGTERM to the process group and SIGKILL
KILL_GRACE_S = 1.0
#: seconds to keep reading the script's pipes after it exited on its own (a grandchild's last words)
DRAIN_S = 5.0
#: after a kill (timeout, lost link): what outlives the group (a setsid daemon) is not waited for
KILLED_DRAIN_S = 0.2
#: the most a frame from the local side may claim (a shipped package is a few MB)
MAX_FRAME = 1 << 30
PYC_MAGIC = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def send(kind: bytes, data: bytes) -> None:
    write_all(1, kind + len(data).to_bytes(4, "big") + data)


class Raw(str):
    """Text that is already JSON (the result, encoded by :mod:`json` in the script's process)."""


def to_json(value: "Any") -> str:
    """JSON for the agent's own reports (str, int, float, bool, None, lists, dicts), without ``json``."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, str):
        text = value.replace("\\", "\\\\").replace('"', '\\"')
        if any(ch < " " for ch in text):
            text = "".join(ch if ch >= " " else f"\\u{ord(ch):04x}" for ch in text)
        return '"' + text + '"'
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (int, float)):
        return repr(value) if value == value and value not in (float("inf"), -float("inf")) else "null"
    if isinstance(value, dict):
        return "{" + ",".join(to_json(str(k)) + ":" + to_json(v) for k, v in value.items()) + "}"
    return "[" + ",".join(to_json(v) for v in value) + "]"


def send_json(kind: bytes, value: "Any") -> None:
    # lone surrogates (undecodable file names) become \\udcXX escapes, which JSON reads back
    send(kind, to_json(value).encode("utf-8", "backslashreplace"))


def read_frame(read_exact: "Callable[[int], bytes]") -> "tuple[bytes, bytes]":
    header = read_exact(5)
    size = int.from_bytes(header[1:], "big")
    if header[:1] not in (b"C", b"S", b"U", b"M", b"G") or size > MAX_FRAME:
        raise ValueError("the stream from the local side was corrupted (frame " + repr(header) + ")")
    return header[:1], read_exact(size)


def user_name() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def kill_group(pgid: int, sig: int) -> None:
    try:  # noqa: SIM105  (far side: no contextlib import)
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def exit_code_of(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def start_guard(pgid: int, life_r: int) -> None:
    """Fork a guard into the script's process group: it blocks reading ``life_r``, whose write end only this
    agent holds, and kills the whole group when that read returns, that is when the agent is gone, however
    it died (SIGKILL included). Signals that a run's stop sends first (SIGTERM, SIGINT, SIGHUP) leave it
    alone: only the group's SIGKILL ends it, so a script that ignores SIGTERM still goes with the agent."""
    pid = os.fork()
    if pid:
        return
    try:
        os.setpgid(0, pgid)
        for sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
            _signal.signal(sig, _signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDWR)  # not ssh's channel: the run's end must not wait for the guard
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, life_r)
        os.closerange(life_r + 1, 1 << 16)
        while os.read(life_r, 1):
            pass
        kill_group(pgid, _signal.SIGKILL)
    finally:
        os._exit(0)


class Run:
    """What the local side sent before ``G``: the config, the script, the shipped modules (their source, and
    their code when compiled for this interpreter) and the script runner's program frame."""

    def __init__(self) -> None:
        self.cfg: dict[str, Any] = {}
        self.script = b""
        self.modules: dict[str, tuple[str, bool, bytes]] = {}
        self.codes: dict[str, bytes] = {}
        self.runner = b""

    def add(self, kind: bytes, data: bytes) -> None:
        if kind == b"C":
            self.cfg = marshal.loads(data)
        elif kind == b"S":
            self.script = data
        elif kind == b"U":
            self.runner = data
        else:  # M
            name, filename, is_package, rest = data.split(b"\0", 3)
            codelen = int.from_bytes(rest[4:8], "big")
            self.modules[name.decode()] = (
                filename.decode(),
                is_package == b"1",
                zlib.decompress(rest[8 + codelen :]),
            )
            if codelen and rest[:4] == PYC_MAGIC:  # compiled for this very bytecode
                self.codes[name.decode()] = zlib.decompress(rest[8 : 8 + codelen])


def load_program(data: bytes, filename: str) -> "types.CodeType":
    """A program frame (``magic codelen zlib(code) zlib(source)``, as stage 1 reads them): its code when the
    magic is this interpreter's, else its source compiled."""
    codelen = int.from_bytes(data[4:8], "big")
    if codelen and data[:4] == PYC_MAGIC:
        return marshal.loads(zlib.decompress(data[8 : 8 + codelen]))  # type: ignore[no-any-return]
    return compile(zlib.decompress(data[8 + codelen :]), filename, "exec", dont_inherit=True)


def serve(stage1_cfg: "dict[str, Any]", read_exact: "Callable[[int], bytes]") -> None:
    """Read the run's frames with stage 1's ``read_exact`` (one reader that never reads ahead, so nothing
    after ``G`` is taken from the pipe), then run the script and stream it back."""
    run = Run()
    try:
        while True:
            kind, data = read_frame(read_exact)
            if kind == b"G":
                break
            run.add(kind, data)
    except EOFError:  # the local side gave up before the go
        return
    except ValueError as exc:
        send_json(EXIT, {"exit_code": 2, "start_error": str(exc)})
        return
    send_json(READY, {
        "python": sys.executable, "version": sys.version.split()[0], "host": os.uname().nodename,
        "pid": os.getpid(), "user": user_name(),
    })  # fmt: skip
    timeout = run.cfg.get("timeout")
    deadline = time.monotonic() + timeout if timeout else None
    try:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        res_r, res_w = os.pipe()
        life_r, life_w = os.pipe()
        # Everything alive now (the interpreter's start-up, this agent) goes to the collector's permanent
        # generation, as gc's documentation advises before a fork: the script's collections then never walk
        # (and so never copy) the pages it shares with this process. Measured: 1-2 ms of every run.
        gc.freeze()
        pid = os.fork()
    except OSError as exc:  # a process or file limit (ulimit -u / -n) on the far side
        send_json(EXIT, {"exit_code": 126, "start_error": "cannot start the script: " + str(exc)})
        return
    if pid == 0:  # the child: its own process group, so one killpg takes every process it starts
        code = 1
        try:
            os.setpgid(0, 0)
            for fd in (out_r, err_r, res_r, life_r, life_w):
                os.close(fd)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            runner: dict[str, Any] = {"__name__": "trainprobe_runner"}
            exec(load_program(run.runner, "<trainprobe-runner>"), runner)
            code, report = runner["run_user"](run.cfg, run.script, run.modules, run.codes)
            write_all(res_w, report)
        finally:
            os._exit(code)
    try:  # the child may have got there first  # noqa: SIM105  (far side: no contextlib import)
        os.setpgid(pid, pid)
    except OSError:
        pass
    for fd in (out_w, err_w, res_w):
        os.close(fd)
    try:  # noqa: SIM105  (far side: no contextlib import)
        start_guard(pid, life_r)
    except OSError:  # no guard (a process limit): the run still goes, with the guarantees before this one
        pass
    os.close(life_r)
    Relay(pid, deadline, out_r, err_r, res_r, float(run.cfg.get("heartbeat") or 0)).run()


class Link:
    """The local side's end of stdin after ``G``: heartbeat frames, then EOF when it stops the run."""

    def __init__(self, lost_after: float) -> None:
        self.lost_after = lost_after
        self.last = time.monotonic()
        self.buffer = b""

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 5:
            size = int.from_bytes(self.buffer[1:5], "big")
            if self.buffer[:1] != HEARTBEAT or size > CHUNK:
                raise ValueError("unexpected frame on stdin")
            if len(self.buffer) < 5 + size:
                break
            self.buffer = self.buffer[5 + size :]
            self.last = time.monotonic()

    def lost(self) -> bool:
        return bool(self.lost_after) and time.monotonic() - self.last > self.lost_after


class Relay:
    """The agent's loop while the script runs: its pipes become frames on stdout, stdin brings heartbeats
    (or EOF: stop), and the timeout, a lost link and the script's end each stop the run; then the exit
    report."""

    def __init__(
        self, pid: int, deadline: "float | None", out_r: int, err_r: int, res_r: int, heartbeat: float
    ) -> None:
        self.pid, self.deadline, self.out_r, self.res_r = pid, deadline, out_r, res_r
        self.poller = select.poll()
        # SIGCHLD wakes the poll at once when the script exits (no polling delay on every run)
        self.wake_r, wake_w = os.pipe()
        for fd in (self.wake_r, wake_w):
            os.set_blocking(fd, False)
        _signal.signal(_signal.SIGCHLD, lambda *_: None)
        _signal.set_wakeup_fd(wake_w)
        self.watched = {0, out_r, err_r, res_r}
        for fd in (*self.watched, self.wake_r):
            self.poller.register(fd, select.POLLIN)
        self.link = Link(heartbeat)
        self.result = b""
        self.status: int | None = None
        self.timed_out = self.killed = False
        self.kill_at: float | None = None
        self.drain_until = 0.0

    def stop(self, reason_timeout: bool) -> None:
        self.timed_out, self.killed = reason_timeout, not reason_timeout
        kill_group(self.pid, _signal.SIGTERM)
        self.kill_at = time.monotonic() + KILL_GRACE_S

    def unwatch(self, fd: int) -> None:
        self.poller.unregister(fd)
        self.watched.discard(fd)

    def read(self, fd: int) -> None:
        """One readable descriptor: the wake-up pipe, stdin, or one of the script's pipes."""
        if fd == self.wake_r:
            try:
                while os.read(self.wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
            return
        chunk = os.read(fd, CHUNK)
        if fd == 0:
            self.from_local(chunk)
        elif not chunk:
            self.unwatch(fd)
            os.close(fd)
        elif fd == self.res_r:
            self.result += chunk
        else:
            send(STDOUT if fd == self.out_r else STDERR, chunk)

    def from_local(self, chunk: bytes) -> None:
        if chunk:
            try:
                self.link.feed(chunk)
                return
            except ValueError:
                pass  # not our stream any more: as if the link were gone
        if self.status is None and self.kill_at is None:
            self.stop(reason_timeout=False)  # the local side closed our stdin: link lost, Ctrl-C, timeout
        self.unwatch(0)

    def check_script(self) -> None:
        """Has the script exited? Else: is a limit passed, or the grace after SIGTERM over?"""
        done, status_now = os.waitpid(self.pid, os.WNOHANG)
        now = time.monotonic()
        if done:
            self.status = status_now
            self.drain_until = now + (KILLED_DRAIN_S if self.kill_at is not None else DRAIN_S)
            # the script is over: whatever it left behind in its group goes too (and closes our pipes)
            kill_group(self.pid, _signal.SIGKILL)
            if 0 in self.watched:
                self.unwatch(0)
        elif self.kill_at is None and self.deadline is not None and now >= self.deadline:
            self.stop(reason_timeout=True)
        elif self.kill_at is None and self.link.lost():
            self.stop(reason_timeout=False)
        elif self.kill_at is not None and now >= self.kill_at:
            kill_group(self.pid, _signal.SIGKILL)

    def run(self) -> None:
        try:
            while self.watched:
                wait = 0.5
                if self.deadline is not None and self.status is None:
                    wait = max(0.0, min(wait, self.deadline - time.monotonic()))
                for fd, _ in self.poller.poll(wait * 1000):
                    self.read(fd)
                if self.status is not None and time.monotonic() > self.drain_until:
                    break  # something outside the group (setsid) holds our pipes; do not wait for it
                if self.status is None:
                    self.check_script()
        finally:
            if self.status is None:
                kill_group(self.pid, _signal.SIGKILL)
                self.status = os.waitpid(self.pid, 0)[1]
        self.send_exit(self.status)

    def send_exit(self, status: int) -> None:
        try:
            report = marshal.loads(self.result) if self.result else {}
        except (EOFError, ValueError, TypeError):
            report = {}
        if report.get("result") is not None:
            report["result"] = Raw(report["result"])
        report.update(exit_code=exit_code_of(status), timed_out=self.timed_out, killed=self.killed)
        if os.WIFSIGNALED(status):
            report["signal"] = os.WTERMSIG(status)
        try:  # nobody may be listening any more  # noqa: SIM105  (far side: no contextlib import)
            send_json(EXIT, report)
        except OSError:
            pass
