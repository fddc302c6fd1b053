"""``run`` and ``call``: the Python API of the remote engine (re-exported by :mod:`trainprobe.remote`)."""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainprobe.errors import UsageError
from trainprobe.remote.argv import build_argv
from trainprobe.remote.logs import control_dir
from trainprobe.remote.session import Module, RunResult, Sink, execute
from trainprobe.remote.target import Target, parse_target

CALL_DRIVER = """\
import importlib, json, sys


def main():
    spec = json.loads(sys.argv[1])
    value = importlib.import_module(spec["module"])
    for part in spec["qualname"].split("."):
        value = getattr(value, part)
    value = value(*spec["args"], **spec["kwargs"])
    to_json = getattr(value, "to_json", None)
    return to_json() if callable(to_json) else value
"""


def _script(script: str | os.PathLike[str]) -> tuple[bytes, str]:
    """(source bytes, filename for tracebacks); a str naming an existing file is a path, else source."""
    if isinstance(script, os.PathLike) or ("\n" not in script and os.path.isfile(script)):
        path = Path(script).resolve()
        try:
            return path.read_bytes(), str(path)
        except OSError as exc:
            raise UsageError(f"cannot read script {path}: {exc.strerror}") from None
    return script.encode(), "<script>"


def run(
    target: str | Target,
    script: str | os.PathLike[str],
    args: Sequence[str] = (),
    *,
    timeout: float | None = None,
    connect_timeout: float = 10.0,
    need: Sequence[str] = (),
    stdout: Sink | None = None,
    stderr: Sink | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    modules: Sequence[Module] = (),
    cancel: threading.Event | None = None,
) -> RunResult:
    """Run a Python script on ``target`` and return what happened.

    ``script`` is a path (``Path``, or a ``str`` naming an existing file) or Python source text. It runs on
    the far
    side as ``__main__`` with ``sys.argv = [script_path, *args]``; tracebacks show the local path. If it
    defines
    ``main()`` (called by trainprobe, or by the script under ``if __name__ == "__main__":``), main's
    JSON-serialisable return value comes back as ``RunResult.result``.

    ``timeout`` bounds the whole run (seconds; None: no limit); ``connect_timeout`` bounds connecting,
    authenticating and login scripts, until the far side's first word. ``need`` lists modules the interpreter
    must
    have (discovery picks the first that has them). ``stdout``/``stderr`` receive the script's output live,
    as raw
    byte chunks, on the calling thread. ``log_dir`` is where the run's full logs go (default: a new directory
    under
    ``$XDG_STATE_HOME/trainprobe/runs``). ``modules`` are shipped and importable from memory on the far side.
    Setting ``cancel`` stops the run (the far side is killed).

    Only a malformed target or an unreadable script raises (TargetSyntaxError/UsageError). Every failure of
    the run
    itself is carried in ``RunResult.error`` (a RemoteError) with a matching ``exit_code``, so that a thread
    pool can
    run many targets and collect every outcome; ``result.raise_for_error()`` raises it. Thread-safe.

    Uses ``TRAINPROBE_SSH_CONFIG`` (an ssh ``-F`` file) and ``TRAINPROBE_CONTROL_DIR`` (ControlMaster sockets;
    empty disables connection reuse) from the environment.
    """
    parsed = target if isinstance(target, Target) else parse_target(target)
    source, filename = _script(script)
    argv = build_argv(
        parsed,
        need=need,
        connect_timeout=connect_timeout,
        control_dir=control_dir(),
        ssh_config=os.environ.get("TRAINPROBE_SSH_CONFIG") or None,
    )
    settings = parsed.settings
    return execute(
        argv,
        str(parsed),
        script=source,
        filename=filename,
        args=[str(a) for a in args],
        settings_env=dict(settings.env),
        cwd=settings.cwd,
        modules=modules,
        timeout=timeout,
        connect_timeout=connect_timeout,
        stdout=stdout,
        stderr=stderr,
        log_dir=Path(log_dir) if log_dir else None,
        slug=parsed.slug,
        cancel=cancel,
    )


def modules_for(function: Callable[..., Any], extra: Sequence[str] = ()) -> tuple[str, list[Module]]:
    """(module name to import on the far side, modules to ship) for ``function``.

    Inside trainprobe: ``trainprobe/__init__.py``, ``trainprobe/errors.py`` and the whole subpackage holding
    the function (these import only stdlib and numpy). Elsewhere: the function's own module file. ``extra``
    names more modules or packages to ship (see :func:`modules_named`), e.g. ``["trainprobe.metrics"]`` for a
    function that imports that subpackage too.
    """
    name = function.__module__
    module = sys.modules.get(name)
    if module is None or not getattr(module, "__file__", None):
        raise UsageError(f"cannot ship {function!r}: its module {name!r} has no source file")
    if name == "trainprobe" or name.startswith("trainprobe."):
        import_name, own = name, modules_named([name])
    else:
        path = Path(str(module.__file__)).resolve()
        import_name = name if name != "__main__" else "_trainprobe_shipped_main"
        own = [Module(import_name, str(path), path.read_bytes())]
    return import_name, _unique([*own, *modules_named(extra)])


def modules_named(names: Sequence[str]) -> list[Module]:
    """The modules to ship so that each of ``names`` imports on the far side.

    A package comes with every module under it, a module alone; the packages above either come with their
    ``__init__`` only (``trainprobe`` also with ``trainprobe.errors``, which its ``__init__`` imports). A name
    inside trainprobe ships its whole subpackage: ``trainprobe.checkpoint.scan`` ships
    ``trainprobe.checkpoint``. Raises UsageError for a name that does not import here or has no source file.
    """
    shipped: list[Module] = []
    for name in names:
        parts = name.split(".")
        if parts[0] == "trainprobe":
            shipped += [_source_of("trainprobe"), _source_of("trainprobe.errors")]
            if len(parts) > 1 and parts[1] != "errors":
                shipped.extend(_source_tree(f"trainprobe.{parts[1]}"))
        else:
            shipped.extend(_source_tree(name))
            shipped.extend(_source_of(".".join(parts[:i])) for i in range(1, len(parts)))
    return _unique(shipped)


def _imported(name: str) -> Path:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise UsageError(f"cannot ship module {name!r}: {exc}") from None
    file = getattr(module, "__file__", None)
    if not file or not file.endswith(".py"):
        raise UsageError(f"cannot ship module {name!r}: it has no Python source file")
    return Path(file).resolve()


def _source_of(name: str) -> Module:
    path = _imported(name)
    return Module(name, str(path), path.read_bytes(), path.name == "__init__.py")


def _source_tree(name: str) -> list[Module]:
    """``name`` and, when it is a package, every module under it."""
    path = _imported(name)
    if path.name != "__init__.py":
        return [Module(name, str(path), path.read_bytes())]
    shipped = []
    for file in sorted(path.parent.rglob("*.py")):
        rel = file.relative_to(path.parent).with_suffix("").parts
        is_package = file.name == "__init__.py"
        mod_name = ".".join((name, *(rel[:-1] if is_package else rel)))
        shipped.append(Module(mod_name, str(file), file.read_bytes(), is_package))
    return shipped


def _unique(modules: Sequence[Module]) -> list[Module]:
    return list({m.name: m for m in modules}.values())


def call_argv(
    function: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], modules: Sequence[str] = ()
) -> tuple[list[str], list[Module]]:
    """(argv for :data:`CALL_DRIVER`, modules to ship) that call ``function(*args, **kwargs)`` far side."""
    module_name, shipped = modules_for(function, modules)
    spec = {"module": module_name, "qualname": function.__qualname__, "args": list(args), "kwargs": kwargs}
    try:
        encoded = json.dumps(spec)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"arguments for {function.__qualname__} must be JSON-serialisable: {exc}") from None
    return [encoded], shipped


def call(
    target: str | Target,
    function: Callable[..., Any],
    *args: Any,
    timeout: float | None = None,
    connect_timeout: float = 10.0,
    need: Sequence[str] = (),
    modules: Sequence[str] = (),
    **kwargs: Any,
) -> Any:
    """Call ``function(*args, **kwargs)`` on ``target`` and return its value.

    The function's module is shipped (see :func:`modules_for`) and imported from memory on the far side, so
    nothing needs to be installed there but Python (and numpy, for trainprobe's checkpoint readers).
    ``modules`` names more modules or packages to ship, for a function that imports beyond its own
    subpackage (``modules=["trainprobe.checkpoint", "trainprobe.metrics"]``; see :func:`modules_named`).
    Arguments and the return value travel as JSON; a return value with a ``to_json()`` method comes back as
    what that returns. Raises the run's RemoteError (RemoteExceptionError carries the remote traceback).
    """
    argv, shipped = call_argv(function, args, kwargs, modules)
    outcome = run(
        target,
        CALL_DRIVER,
        argv,
        timeout=timeout,
        connect_timeout=connect_timeout,
        need=need,
        modules=shipped,
    )
    outcome.raise_for_error()
    if outcome.exit_code:
        from trainprobe.errors import RemoteError

        raise RemoteError(outcome.target, f"the call exited with {outcome.exit_code}; see {outcome.log_dir}")
    return outcome.result
