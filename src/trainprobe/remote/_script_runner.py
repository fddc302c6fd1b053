"""The script's side of the far-side agent: in the child the agent forks, run the user's script as
``__main__`` (shipped modules imported from memory, ``main()``'s value as the result, the user's traceback
as python prints it) and hand back the report.

Shipped like the agent (:mod:`trainprobe.remote.agent`: the ``U`` frame, code or source) and run only in that
child, so the agent itself stays small; the same rules hold: standard library only, Python 3.7 or newer, and
on the common path only built-in modules (``ast``, ``json``, ``traceback`` and ``linecache`` are imported
when a script needs them).
"""

import marshal
import os
import sys

# Not `from typing import ...` at run time (see agent.py): the annotations are strings.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import ast
    import types
    from typing import Any

RESULT_NAME = "__trainprobe_result__"
#: the name :mod:`trainprobe.remote._discovery` is shipped under (``session.with_discovery``): the home
DISCOVERY = "trainprobe_discovery"
MODULE_TYPE = type(sys)


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


def change_directory(given: str, home_known: bool) -> None:
    """``cd=``: a path under ``~`` or ``$HOME`` is expanded by the shipped discovery (the far side's one home,
    shipped whenever ``cd=`` names it); a directory that is not there is named as given and as expanded."""
    path = __import__(DISCOVERY).expand_home(given) if home_known else given
    try:
        os.chdir(path)
    except OSError as exc:
        shown = given if path == given else given + " (" + path + ")"
        raise type(exc)("cd=" + shown + ": " + (exc.strerror or str(exc))) from None


def run_user(
    cfg: "dict[str, Any]",
    script: bytes,
    modules: "dict[str, tuple[str, bool, bytes]]",
    codes: "dict[str, bytes]",
) -> "tuple[int, bytes]":
    """In the child: run the script as ``__main__``; (its exit code, the report: marshal of the result as
    JSON text and the exception)."""
    filename = cfg["filename"]
    report: dict[str, Any] = {"result": None, "exception": None}
    code = 0
    try:
        sys.stdin = open(os.devnull)  # noqa: SIM115  (lives as long as the child)
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # live, line by line
        os.environ.update(cfg.get("env") or {})
        if modules:
            import importlib.util  # before the finder is in place, which would otherwise be asked for it  # noqa: F401

            sys.meta_path.insert(0, MemoryImporter(modules, codes))
        if cfg.get("cwd"):
            change_directory(cfg["cwd"], DISCOVERY in modules)
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
    return code, marshal.dumps(report)
