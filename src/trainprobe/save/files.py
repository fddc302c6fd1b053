"""The CheckpointWriter's directory on disk: what its files are called, how each appears only once complete,
and which ones rotation removes.

A checkpoint is written to a hidden temp file in the same directory, fsynced, and renamed to its name
(``os.replace``, then an fsync of the directory); the manifest and the ``latest`` pointer follow the same way.
So a SIGKILL at any moment leaves the previous checkpoint and ``latest`` intact, and a temp file left by a
killed writer is removed by the next one. torch is passed in, never imported here.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainprobe.checkpoint.units.manifest import build_manifest
from trainprobe.conventions import LATEST_NAME, MANIFEST_SUFFIX, TEMP_MARK

_STEP_FILE = re.compile(r"^step-(\d+)\.pt$")


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}.pt"


def manifest_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + MANIFEST_SUFFIX)


def read_latest(directory: str | os.PathLike[str]) -> Path | None:
    """The checkpoint the ``latest`` pointer in ``directory`` names, or None when there is no pointer yet."""
    pointer = Path(directory) / LATEST_NAME
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return Path(directory) / name if name else None


def _temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{TEMP_MARK}{os.getpid()}")


def _fsync_dir(directory: Path) -> None:
    # Without this, a power loss after os.replace can forget the rename even though the data is on disk.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic_text(path: Path, text: str) -> None:
    tmp = _temp_path(path)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _hash_only(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _fsync_and_hash(path: Path) -> tuple[str, int]:
    """fsync ``path`` and return its sha256 and size, read back from the page cache.

    torch.save is given the path, not a Python file object: its C++ writer then writes without calling back
    into Python for every record, which (measured) interferes less with the training thread; hashlib releases
    the GIL on large chunks.
    """
    with open(path, "rb") as f:
        os.fsync(f.fileno())
    return _hash_only(path)


def _tensor_facts(torch: Any, tensors: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The manifest's per-tensor dtype, shape and finite flag."""
    facts = {}
    for name, t in tensors.items():
        finite = bool(torch.isfinite(t).all()) if (t.is_floating_point() or t.is_complex()) else True
        facts[name] = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "finite": finite}
    return facts


def write_checkpoint(
    torch: Any, obj: Any, tensors: dict[str, Any], *, step: int, target: Path, fsync: bool
) -> None:
    """Write ``obj`` (whose tensors, by dotted name, are ``tensors``) as the checkpoint ``target``, then its
    manifest, then point ``latest`` at it: each file under its name only once complete."""
    tmp = _temp_path(target)
    try:
        torch.save(obj, str(tmp))
        digest, size = _fsync_and_hash(tmp) if fsync else _hash_only(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    manifest = build_manifest(
        step=step,
        file=target.name,
        size=size,
        sha256=digest,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
        tensors=_tensor_facts(torch, tensors),
    )
    _write_atomic_text(manifest_path(target), json.dumps(manifest, indent=1) + "\n")
    if fsync:
        _fsync_dir(target.parent)
    _write_atomic_text(target.parent / LATEST_NAME, target.name + "\n")
    if fsync:
        _fsync_dir(target.parent)


def _complete_checkpoints(directory: Path) -> Iterator[tuple[int, Path]]:
    for entry in directory.iterdir():
        match = _STEP_FILE.match(entry.name)
        if match and manifest_path(entry).exists():
            yield int(match.group(1)), entry


def rotate(directory: Path, keep: int | None, current: Path) -> None:
    """Remove the oldest complete checkpoints beyond ``keep`` (None keeps all), never ``current``."""
    if keep is None:
        return
    complete = sorted(_complete_checkpoints(directory), key=lambda item: item[0])
    excess = len(complete) - keep
    for _step, path in complete:
        if excess <= 0:
            break
        if path == current:
            continue
        # The manifest goes last: a checkpoint without a manifest is never mistaken for a verified one.
        path.unlink(missing_ok=True)
        manifest_path(path).unlink(missing_ok=True)
        excess -= 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(directory: Path) -> None:
    """Remove the temp files a process killed mid-write left (never visible under a checkpoint's name);
    another live writer's file in progress stays."""
    for entry in directory.iterdir():
        if not (entry.name.startswith(".") and TEMP_MARK in entry.name):
            continue
        pid = entry.name.rsplit(TEMP_MARK, 1)[1]
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            entry.unlink()
