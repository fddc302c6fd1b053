"""Discovery: the paths a user gives (files, directories, globs) become *units*, each one checkpoint.

A unit is a file, or a directory that a framework writes as one checkpoint (``checkpoint-N/``,
``global_stepN/``, an accelerate ``save_state`` folder, a DCP directory, a folder of model + optimizer
files). Every command reports one verdict per unit with its files under it. A directory that is no unit is
walked: its checkpoint files (recognised by content) are single-file units, its sub-directories are walked
in turn; files that look like checkpoints but no reader claims are units too, reported as unread.
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass, field

from trainprobe.checkpoint.formats import detect
from trainprobe.checkpoint.frameworks import FRAMEWORKS, Part, role_by_name
from trainprobe.checkpoint.manifest import MANIFEST_SUFFIX

_GLOB_CHARS = set("*?[")
# Names a checkpoint is usually saved under; such a file that no reader claims is reported, never dropped.
LOOKS_LIKE_CHECKPOINT = re.compile(
    r"(?i)\.(pt|pth|bin|ckpt|safetensors|pkl|pickle|distcp|tar|h5|msgpack|npz|gguf|onnx|joblib|pb)$"
)
_NOT_CHECKPOINTS = re.compile(r"(?i)\.(json|ya?ml|txt|md|py|log|csv|tsv|out|err|jsonl|sh)$")


@dataclass
class Unit:
    """One checkpoint: its ``path`` (a file or directory), the ``framework`` that wrote it, its ``parts``
    (each read on its own; shards covered by an index are not parts), ``listed`` files that are not
    checkpoint data (config, JSON), and ``unread`` files that look like checkpoints but no reader claims.
    ``problem`` is set when the path itself is unusable."""

    path: str
    framework: str = "file"
    parts: list[Part] = field(default_factory=list)
    listed: list[Part] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    problem: str | None = None

    @property
    def is_directory(self) -> bool:
        return os.path.isdir(self.path)


def _shards_of(index_path: str) -> set[str]:
    try:
        with open(index_path, "rb") as fh:
            weight_map = json.load(fh).get("weight_map", {})
        folder = os.path.dirname(index_path)
        return {os.path.normpath(os.path.join(folder, str(s))) for s in weight_map.values()}
    except (OSError, ValueError, AttributeError):
        return set()


def _file_unit(path: str) -> Unit:
    unit = Unit(path, "file", [Part(path, "state")])
    manifest = path + MANIFEST_SUFFIX
    if os.path.isfile(manifest):
        unit.listed.append(Part(manifest, "metadata"))
    return unit


def _sort_parts(unit: Unit) -> Unit:
    """Readable parts stay parts (an index's shards folded into it); the rest are listed or unread."""
    covered: set[str] = set()
    for part in unit.parts:
        if part.path.endswith(".index.json"):
            covered |= _shards_of(part.path)
    parts: list[Part] = []
    for part in unit.parts:
        if os.path.normpath(part.path) in covered:
            continue
        if os.path.isdir(part.path) or (part.path.endswith(".index.json") and _shards_of(part.path)):
            parts.append(part)
        elif os.path.getsize(part.path) == 0 or _NOT_CHECKPOINTS.search(part.path):
            unit.listed.append(part)
        elif detect(part.path) is not None:
            parts.append(part)
        elif LOOKS_LIKE_CHECKPOINT.search(part.path):
            unit.unread.append(part.path)
        else:
            unit.listed.append(part)
    unit.parts = parts
    return unit


def _walk(root: str) -> list[Unit]:
    found: list[Unit] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        files = sorted(f for f in files if not f.startswith(".") or f == ".metadata")
        for fw in FRAMEWORKS:
            layout = fw.layout(folder, files, dirs)
            if layout is None:
                continue
            unit = _sort_parts(Unit(folder, layout.framework, list(layout.parts)))
            if not unit.parts and not unit.unread:
                continue  # the framework's marks, but no checkpoint data (a trainer_state.json alone)
            found.append(unit)
            claimed = {os.path.basename(d) for d in layout.claimed_dirs}
            dirs[:] = [] if fw.name == "dcp" else [d for d in dirs if d not in claimed]
            break
        else:
            loose = Unit(folder, "file", [Part(os.path.join(folder, f), role_by_name(f)) for f in files])
            _sort_parts(loose)
            for part in loose.parts:
                found.append(_file_unit(part.path))
            for path in loose.unread:
                found.append(Unit(path, "file", unread=[path]))
    return found


def discover_units(paths: list[str]) -> list[Unit]:
    """Expand ``paths`` in order into units; duplicates are dropped. A path given explicitly is always a
    unit (reported when it is not a checkpoint); inside a directory, files are included by content."""
    units: list[Unit] = []
    seen: set[str] = set()

    def add(unit: Unit) -> None:
        key = os.path.realpath(unit.path)
        if key not in seen:
            seen.add(key)
            units.append(unit)

    for raw in paths:
        if not os.path.lexists(raw) and _GLOB_CHARS & set(raw):
            matches = sorted(glob.glob(raw, recursive=True))
            if not matches:
                add(Unit(raw, problem="no file matches this pattern"))
            expanded = matches
        else:
            expanded = [raw]
        for path in expanded:
            if not os.path.exists(path):
                add(Unit(path, problem="no such file or directory"))
            elif os.path.isdir(path):
                inside = _walk(path)
                if not inside:
                    add(Unit(path, problem="no checkpoint found in this directory"))
                for unit in inside:
                    add(unit)
            else:
                add(_file_unit(path))
    return units
