"""Discovery: the paths a user gives (files, directories, globs) become *units*, each one checkpoint.

A unit is a file, or a directory that a framework writes as one checkpoint (``checkpoint-N/``,
``global_stepN/``, an accelerate ``save_state`` folder, a DCP directory, a folder of model + optimizer
files). Every command reports one verdict per unit with its files under it. A directory that is no unit is
walked: its checkpoint files (recognised by content) are single-file units, its sub-directories are walked
in turn; files that look like checkpoints but no reader claims are units too, reported as unread.
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import re
from dataclasses import dataclass, field
from typing import Protocol

from trainprobe.checkpoint.reading.formats import detect
from trainprobe.checkpoint.safe_io import read_side, walk
from trainprobe.checkpoint.units.frameworks import FRAMEWORKS, Part, role_by_name
from trainprobe.conventions import CHECKPOINT_SUFFIXES, MANIFEST_SUFFIX, NOT_CHECKPOINT_SUFFIXES

_GLOB_CHARS = set("*?[")


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


class Probe(Protocol):
    """What sorting a unit's parts asks of the files: the filesystem here (:class:`LocalFiles`), or what
    other machines said of theirs (a unit spread over node-local disks)."""

    def isdir(self, path: str) -> bool: ...
    def size(self, path: str) -> int: ...
    def readable(self, path: str) -> bool: ...  # a reader claims it (by content)
    def index_bytes(self, path: str) -> bytes | None: ...  # an *.index.json's content


class LocalFiles:
    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def size(self, path: str) -> int:
        try:
            return os.path.getsize(path)
        except OSError:
            return 0

    def readable(self, path: str) -> bool:
        return detect(path) is not None

    def index_bytes(self, path: str) -> bytes | None:
        try:
            return read_side(path)
        except OSError:
            return None


def shards_of(index_path: str, content: bytes | None) -> set[str]:
    """The shard paths an HF ``*.index.json`` (its ``content``) names, beside it."""
    try:
        weight_map = json.loads(content or b"").get("weight_map", {})
        folder = os.path.dirname(index_path)
        return {os.path.normpath(os.path.join(folder, str(s))) for s in weight_map.values()}
    except (OSError, ValueError, AttributeError, TypeError, RecursionError, MemoryError):  # a hostile index
        return set()


def _file_unit(path: str) -> Unit:
    unit = Unit(path, "file", [Part(path, "state")])
    manifest = path + MANIFEST_SUFFIX
    if os.path.isfile(manifest):
        unit.listed.append(Part(manifest, "metadata"))
    return unit


def sort_parts(unit: Unit, probe: Probe | None = None) -> Unit:
    """Readable parts stay parts (an index's shards folded into it); the rest are listed or unread."""
    probe = probe or LocalFiles()
    shards = {
        p.path: shards_of(p.path, probe.index_bytes(p.path))
        for p in unit.parts
        if p.path.endswith(".index.json")
    }
    covered = set().union(*shards.values()) if shards else set()
    parts: list[Part] = []
    for part in unit.parts:
        if os.path.normpath(part.path) in covered:
            continue
        empty = not probe.isdir(part.path) and probe.size(part.path) == 0
        if probe.isdir(part.path) or shards.get(part.path):
            parts.append(part)
        elif empty and part.path.lower().endswith(CHECKPOINT_SUFFIXES):
            parts.append(part)  # a save that never wrote its data: read, it is "empty", never dropped
        elif empty or part.path.lower().endswith(NOT_CHECKPOINT_SUFFIXES):
            unit.listed.append(part)
        elif probe.readable(part.path):
            parts.append(part)
        elif part.path.lower().endswith(CHECKPOINT_SUFFIXES):  # a checkpoint's name, no reader: not read
            unit.unread.append(part.path)
        else:
            unit.listed.append(part)
    unit.parts = parts
    return unit


def _walk(root: str) -> list[Unit]:
    found: list[Unit] = []
    not_read: list[tuple[str, str]] = []
    for folder, dirs, all_files in walk(root, not_read):
        for path, reason in not_read:
            found.append(not_read_unit(path, reason))
        not_read.clear()
        files = [f for f in all_files if not f.startswith(".") or f == ".metadata"]
        for fw in FRAMEWORKS:
            layout = fw.layout(folder, files, dirs)
            if layout is None:
                continue
            unit = sort_parts(Unit(folder, layout.framework, list(layout.parts)))
            if not unit.parts and not unit.unread:
                continue  # the framework's marks, but no checkpoint data (a trainer_state.json alone)
            found.append(unit)
            claimed = {os.path.basename(d) for d in layout.claimed_dirs}
            dirs[:] = [] if fw.name == "dcp" else [d for d in dirs if d not in claimed]
            break
        else:
            loose = Unit(folder, "file", [Part(os.path.join(folder, f), role_by_name(f)) for f in files])
            sort_parts(loose)
            for part in loose.parts:
                found.append(_file_unit(part.path))
            for path in loose.unread:
                found.append(Unit(path, "file", unread=[path]))
    found.extend(not_read_unit(path, reason) for path, reason in not_read)
    return found


#: How a unit's ``problem`` starts when its path could not be opened at all.
NOT_READ = "not read"


def not_read_unit(path: str, reason: str) -> Unit:
    """A path the walk could not open (an unreadable directory, a too-long path, a loop, a dangling link):
    a unit whose verdict is unreadable, never dropped."""
    return Unit(path, problem=f"{NOT_READ}: {reason}")


def _glob(pattern: str) -> list[str]:
    """``glob.glob(pattern, recursive=True)`` whose ``**`` never enters a directory symlink (``d/a -> .``
    would never end): the fixed prefix is matched by glob, the rest by an explicit-stack walk."""
    if "**" not in pattern:
        return glob.glob(pattern)
    head, _, _ = pattern.partition("**")
    roots = glob.glob(head) if _GLOB_CHARS & set(head) else [head or "."]
    out: list[str] = []
    ignored: list[tuple[str, str]] = []
    for root in roots:
        if not os.path.isdir(root) or os.path.islink(root.rstrip("/") or "/"):
            continue
        for folder, dirs, files in walk(root, ignored):
            for name in [*dirs, *files]:
                full = os.path.join(folder, name)
                rel = full if head else os.path.relpath(full, ".")
                if _glob_match(rel, pattern):
                    out.append(rel)
    return out


def _glob_match(path: str, pattern: str) -> bool:
    """``pattern`` matches ``path`` as ``glob`` would (``**/``: any folders, ``*``/``?``: within one)."""
    rx: list[str] = []
    for piece in re.split(r"(\*\*/?|\*|\?)", pattern):
        if piece.startswith("**"):
            rx.append("(?:.*/)?" if piece.endswith("/") else ".*")
        elif piece == "*":
            rx.append("[^/]*")
        elif piece == "?":
            rx.append("[^/]")
        elif piece:
            rx.append(fnmatch.translate(piece)[4:-3])
    return re.fullmatch("".join(rx), path, flags=re.S) is not None


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
            matches = sorted(_glob(raw))
            if not matches:
                add(Unit(raw, problem="no file matches this pattern"))
            expanded = matches
        else:
            expanded = [raw]
        for path in expanded:
            if os.path.islink(path) and not os.path.exists(path):
                add(not_read_unit(path, "a dangling symbolic link or a loop"))
            elif not os.path.exists(path):
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
