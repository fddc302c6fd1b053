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
bytes, ``M`` a module to import from memory (``name\\0filename\\0is_package\\0`` then ``magic codelen
zlib(code) zlib(source)``: the code is used when ``magic`` is this interpreter's), ``G`` go; then ``B``
heartbeats until the run ends. Missing heartbeats for ``heartbeat`` seconds, or EOF on stdin, mean the link
was lost or the local side gave up, and the run is killed.

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
    import ast
    import types
    from typing import Any

STDOUT, STDERR, READY, EXIT = b"1", b"2", b"R", b"X"
#: the frames the local side may send after ``G``
HEARTBEAT = b"B"
CHUNK = 1 << 16
RESULT_NAME = "__trainprobe_result__"
#: seconds between SIGTERM to the process group and SIGKILL
KILL_GRACE_S = 1.0
#: seconds to keep reading the script's pipes after it exited on its own (a grandchild's last words)
DRAIN_S = 5.0
#: after a kill (timeout, lost link): what outlives the group (a setsid daemon) is not waited for
KILLED_DRAIN_S = 0.2
#: the most a frame from the local side may claim (a shipped package is a few MB)
MAX_FRAME = 1 << 30
MODULE_TYPE = type(sys)
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


def read_exact(n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(0, min(n, 1 << 20))
        if not chunk:
            raise EOFError("stdin closed before the run started")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame() -> "tuple[bytes, bytes]":
    header = read_exact(5)
    size = int.from_bytes(header[1:], "big")
    if header[:1] not in (b"C", b"S", b"M", b"G") or size > MAX_FRAME:
        raise ValueError("the stream from the local side was corrupted (frame " + repr(header) + ")")
    return header[:1], read_exact(size)


class MemoryImporter:
    """Imports shipped modules from memory, ahead of anything installed on the far side; hands their source to
    ``linecache`` on demand (``get_source``), so tracebacks show the local file's lines."""

    def __init__(self, modules: "dict[str, tuple[str, bool, bytes]]", codes: "dict[str, bytes]") -> None:
        self.modules = modules
        self.codes = codes

    def find_spec(self, name: str, path: "Any" = None, target: "Any" = None) -> "Any":
        if name not in self.modules:
            return None
        filename, is_package, _ = self.modules[name]
        return sys.modules["importlib.util"].spec_from_loader(
            name, self, origin=filename, is_package=is_package
        )

    def create_module(self, spec: "Any") -> None:
        return None

    def exec_module(self, module: "types.ModuleType") -> None:
        filename, _, source = self.modules[module.__name__]
        module.__file__ = filename
        code = self.codes.get(module.__name__)
        exec(
            marshal.loads(code) if code else compile(source, filename, "exec", dont_inherit=True),
            module.__dict__,
        )

    def get_source(self, name: str) -> "str | None":
        found = self.modules.get(name)
        return found[2].decode("utf-8", "replace") if found else None


class ScriptSource:
    """The ``__loader__`` of the script's ``__main__``: its source for ``linecache``, asked lazily."""

    def __init__(self, source: bytes) -> None:
        self.source = source

    def get_source(self, name: str) -> str:
        return self.source.decode("utf-8", "replace")


def remember_sources(sources: "dict[str, bytes]") -> None:
    """Put the script's and the shipped modules' lines into linecache before a traceback is printed."""
    import linecache

    for filename, source in sources.items():
        lines = source.decode("utf-8", "replace").splitlines(True)
        linecache.cache[filename] = (len(source), None, lines, filename)


def is_main_guard(node: "ast.stmt") -> bool:
    import ast

    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    parts = [node.test.left, *node.test.comparators]
    names = [p.id for p in parts if isinstance(p, ast.Name)]
    consts = [getattr(p, "value", getattr(p, "s", None)) for p in parts if not isinstance(p, ast.Name)]
    return names == ["__name__"] and consts == ["__main__"]


def prepare(source: bytes, filename: str) -> "tuple[types.CodeType, bool]":
    """Compile the script; (code, call main() afterwards?).

    A top-level ``main()`` call statement inside ``if __name__ == "__main__":`` is turned into an assignment
    so its return value becomes the result; a script with ``def main`` and no such guard has ``main()``
    called for it.
    """
    if b"main" not in source:  # nothing to call or guard: no syntax tree needed (nor importing ast)
        return compile(source, filename, "exec", dont_inherit=True), False
    import ast

    tree = ast.parse(source, filename)
    guarded = False
    for node in tree.body:
        if is_main_guard(node):
            guarded = True
            for index, stmt in enumerate(node.body):  # type: ignore[attr-defined]
                call = stmt.value if isinstance(stmt, ast.Expr) else None
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "main":
                    assign = ast.Assign(targets=[ast.Name(id=RESULT_NAME, ctx=ast.Store())], value=call)
                    node.body[index] = ast.copy_location(assign, stmt)  # type: ignore[attr-defined]
    ast.fix_missing_locations(tree)
    defines_main = any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)
    return compile(tree, filename, "exec", dont_inherit=True), defines_main and not guarded


def run_user(
    cfg: "dict[str, Any]",
    script: bytes,
    modules: "dict[str, tuple[str, bool, bytes]]",
    codes: "dict[str, bytes]",
    result_fd: int,
) -> int:
    """In the child: run the script as ``__main__``; write the report (marshal: result as JSON text,
    exception) to ``result_fd``, which only this agent reads."""
    filename = cfg["filename"]
    report: dict[str, Any] = {"result": None, "exception": None}
    code = 0
    try:
        sys.stdin = open(os.devnull)  # noqa: SIM115  (lives as long as the child)
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # live, line by line
        os.environ.update(cfg.get("env") or {})
        if cfg.get("cwd"):
            os.chdir(os.path.expanduser(cfg["cwd"]))
        if modules:
            import importlib.util  # before the finder is in place, which would otherwise be asked for it  # noqa: F401

            sys.meta_path.insert(0, MemoryImporter(modules, codes))
        sys.argv = [filename, *cfg.get("args", [])]
        sys.path[0] = os.getcwd()
        module = MODULE_TYPE("__main__")
        module.__file__ = filename
        module.__loader__ = ScriptSource(script)  # type: ignore[assignment]
        sys.modules["__main__"] = module
        compiled, call_main = prepare(script, filename)
        exec(compiled, module.__dict__)
        if call_main:
            module.__dict__[RESULT_NAME] = module.__dict__["main"]()
        value = module.__dict__.get(RESULT_NAME)
        if value is not None:
            import json

            try:
                report["result"] = json.dumps(value)
            except (TypeError, ValueError) as exc:
                message = "main() returned a value that is not JSON-serialisable: " + str(exc)
                print(message, file=sys.stderr)
                report["exception"] = {"type": type(exc).__name__, "message": message, "traceback": ""}
                code = 1
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException as exc:  # the user's exception: printed like python does, and reported
        import traceback

        remember_sources({filename: script, **{f: s for f, _, s in modules.values()}})
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == run_user.__code__.co_filename:
            tb = tb.tb_next  # the user's frames only, as if python had run the script itself
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        sys.stderr.write(text)
        report["exception"] = {"type": type(exc).__name__, "message": str(exc), "traceback": text}
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105  (far side: no contextlib import)
            stream.flush()
        except Exception:  # a closed or broken stream: nothing left to say
            pass
    write_all(result_fd, marshal.dumps(report))
    return code


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


def serve(stage1_cfg: "dict[str, Any]") -> None:
    cfg: dict[str, Any] = {}
    script = b""
    modules: dict[str, tuple[str, bool, bytes]] = {}
    codes: dict[str, bytes] = {}
    try:
        while True:
            kind, data = read_frame()
            if kind == b"C":
                cfg = marshal.loads(data)
            elif kind == b"S":
                script = data
            elif kind == b"M":
                name, filename, is_package, rest = data.split(b"\0", 3)
                codelen = int.from_bytes(rest[4:8], "big")
                modules[name.decode()] = (
                    filename.decode(),
                    is_package == b"1",
                    zlib.decompress(rest[8 + codelen :]),
                )
                if codelen and rest[:4] == PYC_MAGIC:  # compiled for this very bytecode
                    codes[name.decode()] = zlib.decompress(rest[8 : 8 + codelen])
            else:
                break
    except EOFError:  # the local side gave up before the go
        return
    except ValueError as exc:
        send_json(EXIT, {"exit_code": 2, "start_error": str(exc)})
        return
    send_json(READY, {
        "python": sys.executable, "version": sys.version.split()[0], "host": os.uname().nodename,
        "pid": os.getpid(), "user": user_name(),
    })  # fmt: skip
    timeout = cfg.get("timeout")
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
            code = run_user(cfg, script, modules, codes, res_w)
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
    relay(pid, deadline, out_r, err_r, res_r, float(cfg.get("heartbeat") or 0))


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


def relay(pid: int, deadline: "float | None", out_r: int, err_r: int, res_r: int, heartbeat: float) -> None:
    poller = select.poll()
    # SIGCHLD wakes the poll at once when the script exits (no polling delay on every run)
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    _signal.signal(_signal.SIGCHLD, lambda *_: None)
    _signal.set_wakeup_fd(wake_w)
    watched = {0, out_r, err_r, res_r}
    for fd in (*watched, wake_r):
        poller.register(fd, select.POLLIN)
    link = Link(heartbeat)
    result = b""
    status: int | None = None
    timed_out = killed = False
    kill_at: float | None = None
    drain_until = 0.0

    def stop(reason_timeout: bool) -> None:
        nonlocal timed_out, killed, kill_at
        timed_out, killed = reason_timeout, not reason_timeout
        kill_group(pid, _signal.SIGTERM)
        kill_at = time.monotonic() + KILL_GRACE_S

    try:
        while watched:
            wait = 0.5
            if deadline is not None and status is None:
                wait = max(0.0, min(wait, deadline - time.monotonic()))
            for fd, _ in poller.poll(wait * 1000):
                if fd == wake_r:
                    try:
                        while os.read(wake_r, 4096):
                            pass
                    except BlockingIOError:
                        pass
                    continue
                chunk = os.read(fd, CHUNK)
                if fd == 0:
                    if chunk:
                        try:
                            link.feed(chunk)
                            continue
                        except ValueError:
                            chunk = b""  # not our stream any more: as if the link were gone
                    if status is None and kill_at is None:
                        stop(
                            reason_timeout=False
                        )  # the local side closed our stdin: link lost, Ctrl-C, timeout
                    poller.unregister(0)
                    watched.discard(0)
                    continue
                if not chunk:
                    poller.unregister(fd)
                    watched.discard(fd)
                    os.close(fd)
                elif fd == res_r:
                    result += chunk
                else:
                    send(STDOUT if fd == out_r else STDERR, chunk)
            if status is not None and time.monotonic() > drain_until:
                break  # something outside the group (setsid) holds our pipes; do not wait for it
            if status is None:
                done, status_now = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = status_now
                    drain_until = time.monotonic() + (KILLED_DRAIN_S if kill_at is not None else DRAIN_S)
                    # the script is over: whatever it left behind in its group goes too (and closes our pipes)
                    kill_group(pid, _signal.SIGKILL)
                    if 0 in watched:
                        poller.unregister(0)
                        watched.discard(0)
                elif kill_at is None and deadline is not None and time.monotonic() >= deadline:
                    stop(reason_timeout=True)
                elif kill_at is None and link.lost():
                    stop(reason_timeout=False)
                elif kill_at is not None and time.monotonic() >= kill_at:
                    kill_group(pid, _signal.SIGKILL)
    finally:
        if status is None:
            kill_group(pid, _signal.SIGKILL)
            status = os.waitpid(pid, 0)[1]
    try:
        report = marshal.loads(result) if result else {}
    except (EOFError, ValueError, TypeError):
        report = {}
    if report.get("result") is not None:
        report["result"] = Raw(report["result"])
    report.update(exit_code=exit_code_of(status), timed_out=timed_out, killed=killed)
    if os.WIFSIGNALED(status):
        report["signal"] = os.WTERMSIG(status)
    try:  # nobody may be listening any more  # noqa: SIM105  (far side: no contextlib import)
        send_json(EXIT, report)
    except OSError:
        pass
