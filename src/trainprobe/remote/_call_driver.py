"""The script :func:`trainprobe.remote.call` runs on the far side: import the shipped function, call it with
the JSON arguments of ``argv[1]`` (``{"module", "qualname", "args", "kwargs", "paths"}``, from
:func:`trainprobe.remote.shipping.call_argv`), return its value (or what its ``to_json()`` gives).

Sent as the script's source (:data:`trainprobe.remote.shipping.CALL_DRIVER`); standard library only, Python
3.7 or newer. The arguments ``paths`` names are far-side paths: their ``~`` and ``$HOME`` are expanded
before the call by the shipped discovery's ``expand_home`` (the far side's one home), never by a shell.
"""

import importlib
import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


def places(spec: "dict[str, Any]") -> "Iterator[tuple[Any, Any]]":
    """(container, key) of each argument ``spec["paths"]`` names: ``"0"`` the first positional argument,
    ``"run_dir"`` a keyword, ``"1.checkpoints"`` a key of the second argument; one not passed is skipped."""
    for where in spec.get("paths") or ():
        first, _, key = where.partition(".")
        holder: Any = spec["args"] if first.isdigit() else spec["kwargs"]
        name: Any = int(first) if first.isdigit() else first
        if name not in (range(len(holder)) if isinstance(holder, list) else holder):
            continue
        if key:
            holder, name = holder[name], key
            if not isinstance(holder, dict) or name not in holder:
                continue
        yield holder, name


def expand_paths(spec: "dict[str, Any]") -> "dict[str, str]":
    """Each path (or list of paths) :func:`places` names, expanded in place; {given: expanded} of those that
    changed."""
    from trainprobe_discovery import expand_home  # type: ignore[import-not-found]  # shipped with the call

    changed: dict[str, str] = {}

    def expanded(value: "Any") -> "Any":
        if isinstance(value, list):
            return [expanded(item) for item in value]
        if isinstance(value, str) and expand_home(value) != value:
            changed[value] = expand_home(value)
            return changed[value]
        return value

    for holder, name in places(spec):
        holder[name] = expanded(holder[name])
    return changed


def name_given(exc: BaseException, changed: "dict[str, str]") -> None:
    """A trainprobe error (its ``message``) that names an expanded path which is not there names it as given
    too: ``~/run (/home/alice/run): no such file or directory``."""
    message = getattr(exc, "message", None)
    if not isinstance(message, str):
        return
    for given, path in changed.items():
        if os.path.exists(path):
            continue
        for shown in (path, os.path.normpath(path)):
            if shown in message:
                message = message.replace(shown, given + " (" + shown + ")")
                break
    exc.message = message  # type: ignore[attr-defined]


def main() -> "Any":
    spec = json.loads(sys.argv[1])
    changed = expand_paths(spec) if spec.get("paths") else {}
    value = importlib.import_module(spec["module"])
    for part in spec["qualname"].split("."):
        value = getattr(value, part)
    try:
        value = value(*spec["args"], **spec["kwargs"])  # type: ignore[operator]
    except Exception as exc:
        name_given(exc, changed)
        raise
    to_json = getattr(value, "to_json", None)
    return to_json() if callable(to_json) else value
