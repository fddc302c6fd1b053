"""Module shipping: which source files go to the far side so that a function imports there from memory.

:func:`modules_for` names what a function needs, :func:`modules_named` what a list of module or package names
needs, :func:`call_argv` packs a call (function, JSON arguments) for :data:`CALL_DRIVER`, the script that
makes the call on the far side. :func:`trainprobe.remote.call` and
:func:`trainprobe.remote.fanout.call_fleet` use them; nothing here starts a process.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainprobe.errors import UsageError
from trainprobe.remote.session import Module, with_discovery

#: the script that makes a call on the far side (:mod:`trainprobe.remote._call_driver`), as source text
CALL_DRIVER = (Path(__file__).parent / "_call_driver.py").read_text(encoding="utf-8")


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
    ``__init__`` only (``trainprobe`` also with ``trainprobe.errors``, which its ``__init__`` imports, and
    ``trainprobe.conventions`` and ``trainprobe.plugins``, which every subpackage may import). A name inside
    trainprobe ships its whole subpackage: ``trainprobe.checkpoint.scan`` ships ``trainprobe.checkpoint``.
    Raises UsageError for a name that does not import here or has no source file.
    """
    shipped: list[Module] = []
    for name in names:
        parts = name.split(".")
        if parts[0] == "trainprobe":
            shipped += [_source_of(f"trainprobe{m}") for m in ("", ".errors", ".conventions", ".plugins")]
            if len(parts) > 1 and parts[1] not in ("errors", "conventions", "plugins"):
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
    function: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    modules: Sequence[str] = (),
    far_paths: Sequence[str] = (),
) -> tuple[list[str], list[Module]]:
    """(argv for :data:`CALL_DRIVER`, modules to ship) that call ``function(*args, **kwargs)`` far side.

    ``far_paths`` names the arguments that are paths there (``"0"``, a keyword's name, ``"1.checkpoints"``
    for a key of a dict argument; each a path or a list of paths): the driver expands their ``~`` and
    ``$HOME`` with the far side's home before the call, and a trainprobe error the call raises about such a
    path that is not there names it as given and as expanded."""
    module_name, shipped = modules_for(function, modules)
    spec: dict[str, Any] = {
        "module": module_name, "qualname": function.__qualname__, "args": list(args), "kwargs": kwargs,
    }  # fmt: skip
    if far_paths:
        spec["paths"] = list(far_paths)
        shipped = with_discovery(shipped)
    try:
        encoded = json.dumps(spec)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"arguments for {function.__qualname__} must be JSON-serialisable: {exc}") from None
    return [encoded], shipped
