"""Turn the paths a user gives (files, directories, globs) into checkpoints to scan, by content."""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass

from trainprobe.checkpoint.formats import detect
from trainprobe.checkpoint.formats.dcp import METADATA

_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class Target:
    """One checkpoint to scan; ``problem`` is set when the path itself is unusable (missing, unreadable)."""

    path: str
    problem: str | None = None


def _shards_of(index_path: str) -> set[str]:
    try:
        with open(index_path, "rb") as fh:
            weight_map = json.load(fh).get("weight_map", {})
        folder = os.path.dirname(index_path)
        return {os.path.normpath(os.path.join(folder, str(s))) for s in weight_map.values()}
    except (OSError, ValueError, AttributeError):
        return set()


def _walk(root: str) -> list[str]:
    """Checkpoints under ``root``: DCP directories whole, HF indexes with their shards, other files by
    content."""
    found: list[str] = []
    covered: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        if METADATA in files:
            found.append(folder)
            dirs[:] = []
            continue
        for name in sorted(files):
            if name.endswith(".index.json"):
                path = os.path.join(folder, name)
                shards = _shards_of(path)
                if shards:
                    found.append(path)
                    covered |= shards
        for name in sorted(files):
            path = os.path.join(folder, name)
            if os.path.normpath(path) in covered or name.endswith(".index.json"):
                continue
            if not os.path.isfile(path) or os.path.getsize(path) == 0:
                continue
            if detect(path) is not None:
                found.append(path)
    return found


def discover(paths: list[str]) -> list[Target]:
    """Expand ``paths`` in order; duplicates are dropped. A path given explicitly is always scanned (and
    reported when it is not a checkpoint); files inside a directory are included only when their content is a
    checkpoint."""
    targets: list[Target] = []
    seen: set[str] = set()

    def add(target: Target) -> None:
        key = os.path.realpath(target.path)
        if key not in seen:
            seen.add(key)
            targets.append(target)

    for raw in paths:
        if not os.path.lexists(raw) and _GLOB_CHARS & set(raw):
            matches = sorted(glob.glob(raw, recursive=True))
            if not matches:
                add(Target(raw, "no file matches this pattern"))
            expanded = matches
        else:
            expanded = [raw]
        for path in expanded:
            if not os.path.exists(path):
                add(Target(path, "no such file or directory"))
            elif os.path.isdir(path):
                inside = _walk(path)
                if not inside:
                    add(Target(path, "no checkpoint found in this directory"))
                for p in inside:
                    add(Target(p))
            else:
                add(Target(path))
    return targets
