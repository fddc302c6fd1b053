"""The far-side agent: runs one user script in a child process group and streams everything back in frames.

Shipped as source over stdin by stage 1 (:mod:`trainprobe.remote._stage1`) and started with :func:`serve`; it
uses
only the standard library and runs on Python 3.7 or newer. Importing this module locally is harmless (the
local side
takes the frame constants from here, so both ends agree).

Frames, both ways: one type byte, a 4-byte big-endian length, the data.

local → far: ``C`` config (JSON), ``S`` the script's bytes, ``M`` a module to import from memory
(``name\\0filename\\0is_package\\0source``), ``G`` go. After ``G`` the agent only watches stdin for EOF: the
link
was lost or the local side gave up, and the run is killed.

far → local (after the magic line of stage 1): ``H`` hello, ``F`` interpreter not found (JSON), ``R`` ready
(JSON), ``1``/``2`` stdout/stderr bytes, ``X`` exit (JSON: exit_code, result, exception, timed_out, killed).
"""

from __future__ import annotations

import contextlib
import json
import linecache
import os
import pwd
import selectors
import signal
import sys
import time
import types
import zlib

# Not `from typing import ...` at run time: typing costs the far side a few milliseconds on every run, and
# here it only names types in annotations (strings, under the __future__ import above).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import ast
    from typing import Any

STDOUT, STDERR, READY, EXIT = b"1", b"2", b"R", b"X"
CHUNK = 1 << 16
RESULT_NAME = "__trainprobe_result__"
#: the file name stage 1 compiles this agent under
AGENT_FILENAME = "<trainprobe-agent>"
#: seconds between SIGTERM to the process group and SIGKILL
KILL_GRACE_S = 1.0
#: seconds to keep reading the script's pipes after it exited
DRAIN_S = 5.0


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def send(kind: bytes, data: bytes) -> None:
    write_all(1, kind + len(data).to_bytes(4, "big") + data)


def send_json(kind: bytes, value: Any) -> None:
    send(kind, json.dumps(value).encode())


def read_exact(n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(0, min(n, 1 << 20))
        if not chunk:
            raise EOFError("stdin closed before the run started")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame() -> tuple[bytes, bytes]:
    header = read_exact(5)
    return header[:1], read_exact(int.from_bytes(header[1:], "big"))


class MemoryImporter:
    """Imports shipped modules from memory, ahead of anything installed on the far side."""

    def __init__(self, modules: dict[str, tuple[str, bool, bytes]]) -> None:
        self.modules = modules

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.modules:
            return None
        filename, is_package, _ = self.modules[name]
        return sys.modules["importlib.util"].spec_from_loader(
            name, self, origin=filename, is_package=is_package
        )

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        filename, _, source = self.modules[module.__name__]
        module.__file__ = filename
        remember_source(filename, source)
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)


def remember_source(filename: str, source: bytes) -> None:
    """Let tracebacks print the local file's lines, which do not exist on the far side."""
    lines = source.decode("utf-8", "replace").splitlines(True)
    linecache.cache[filename] = (len(source), None, lines, filename)


def is_main_guard(node: ast.stmt) -> bool:
    import ast

    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    parts = [node.test.left, *node.test.comparators]
    names = [p.id for p in parts if isinstance(p, ast.Name)]
    consts = [getattr(p, "value", getattr(p, "s", None)) for p in parts if not isinstance(p, ast.Name)]
    return names == ["__name__"] and consts == ["__main__"]


def prepare(source: bytes, filename: str) -> tuple[types.CodeType, bool]:
    """Compile the script; (code, call main() afterwards?).

    A top-level ``main()`` call statement inside ``if __name__ == "__main__":`` is turned into an assignment
    so its
    return value becomes the result; a script with ``def main`` and no such guard has ``main()`` called for
    it.
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
    cfg: dict[str, Any], script: bytes, modules: dict[str, tuple[str, bool, bytes]], result_fd: int
) -> int:
    """In the child: run the script as ``__main__``; write the result/exception JSON to ``result_fd``."""
    filename = cfg["filename"]
    report: dict[str, Any] = {"has_result": False, "result": None, "exception": None}
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

            sys.meta_path.insert(0, MemoryImporter(modules))
        sys.argv = [filename, *cfg.get("args", [])]
        sys.path[0] = os.getcwd()
        remember_source(filename, script)
        module = types.ModuleType("__main__")
        module.__file__ = filename
        sys.modules["__main__"] = module
        compiled, call_main = prepare(script, filename)
        exec(compiled, module.__dict__)
        if call_main:
            module.__dict__[RESULT_NAME] = module.__dict__["main"]()
        if RESULT_NAME in module.__dict__:
            report["result"] = module.__dict__[RESULT_NAME]
            report["has_result"] = report["result"] is not None
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException as exc:  # the user's exception: printed like python does, and reported
        import traceback

        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == AGENT_FILENAME:
            tb = tb.tb_next  # the user's frames only, as if python had run the script itself
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        sys.stderr.write(text)
        report["exception"] = {"type": type(exc).__name__, "message": str(exc), "traceback": text}
        code = 1
    try:
        data = json.dumps(report).encode()
    except (TypeError, ValueError) as exc:
        message = "main() returned a value that is not JSON-serialisable: " + str(exc)
        print(message, file=sys.stderr)
        data = json.dumps({"has_result": False, "result": None, "exception": {
            "type": type(exc).__name__, "message": message, "traceback": ""}}).encode()  # fmt: skip
        code = code or 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    write_all(result_fd, data)
    return code


def user_name() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def exit_code_of(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def serve(stage1_cfg: dict[str, Any]) -> None:
    cfg: dict[str, Any] = {}
    script = b""
    modules: dict[str, tuple[str, bool, bytes]] = {}
    while True:
        kind, data = read_frame()
        if kind == b"C":
            cfg = json.loads(data)
        elif kind == b"S":
            script = data
        elif kind == b"M":
            name, filename, is_package, source = data.split(b"\0", 3)
            modules[name.decode()] = (filename.decode(), is_package == b"1", zlib.decompress(source))
        elif kind == b"G":
            break
    send_json(READY, {
        "python": sys.executable, "version": sys.version.split()[0], "host": os.uname().nodename,
        "pid": os.getpid(), "user": user_name(),
    })  # fmt: skip
    timeout = cfg.get("timeout")
    deadline = time.monotonic() + timeout if timeout else None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own process group, so one killpg takes every process it starts
        code = 1
        try:
            os.setpgid(0, 0)
            for fd in (out_r, err_r, res_r):
                os.close(fd)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            code = run_user(cfg, script, modules, res_w)
        finally:
            os._exit(code)
    with contextlib.suppress(OSError):  # the child may have got there first
        os.setpgid(pid, pid)
    for fd in (out_w, err_w, res_w):
        os.close(fd)
    relay(pid, deadline, out_r, err_r, res_r)


def relay(pid: int, deadline: float | None, out_r: int, err_r: int, res_r: int) -> None:
    selector = selectors.DefaultSelector()
    # SIGCHLD wakes the select at once when the script exits (no polling delay on every run)
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    for fd in (0, out_r, err_r, res_r, wake_r):
        selector.register(fd, selectors.EVENT_READ)
    result = b""
    status: int | None = None
    timed_out = killed = False
    kill_at: float | None = None
    drain_until = 0.0
    try:
        while any(fd != wake_r for fd in selector.get_map()):
            wait = 0.5
            if deadline is not None and status is None:
                wait = max(0.0, min(wait, deadline - time.monotonic()))
            for key, _ in selector.select(wait):
                fd = key.fd
                if fd == wake_r:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(wake_r, 4096):
                            pass
                    continue
                chunk = os.read(fd, CHUNK)
                if fd == 0:
                    if not chunk and status is None:
                        killed = True  # the local side closed our stdin: link lost, Ctrl-C or its timeout
                        kill_group(pid, signal.SIGTERM)
                        kill_at = time.monotonic() + KILL_GRACE_S
                    if not chunk:
                        selector.unregister(0)
                    continue
                if not chunk:
                    selector.unregister(fd)
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
                    drain_until = time.monotonic() + DRAIN_S
                    # the script is over: whatever it left behind in its group goes too (and closes our pipes)
                    kill_group(pid, signal.SIGKILL)
                    if 0 in selector.get_map():
                        selector.unregister(0)
                elif deadline is not None and time.monotonic() >= deadline and kill_at is None:
                    timed_out = True
                    kill_group(pid, signal.SIGTERM)
                    kill_at = time.monotonic() + KILL_GRACE_S
                elif kill_at is not None and time.monotonic() >= kill_at:
                    kill_group(pid, signal.SIGKILL)
    finally:
        if status is None:
            kill_group(pid, signal.SIGKILL)
            status = os.waitpid(pid, 0)[1]
    try:
        report = json.loads(result) if result else {}
    except ValueError:
        report = {}
    report.update(exit_code=exit_code_of(status), timed_out=timed_out, killed=killed)
    with contextlib.suppress(OSError):  # nobody may be listening any more
        send_json(EXIT, report)
