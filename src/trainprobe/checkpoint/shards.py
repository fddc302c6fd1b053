"""A checkpoint unit scanned where its files are, on several machines (``scan --on FLEET --sharded PATH``):
the far side's two calls. Shipped with trainprobe.checkpoint: stdlib + numpy.

1. :func:`inventory`: the files of PATH this machine has, each with what tells one file from another file of
   the same name — where it lives (the boot, the device and the inode: the same file on storage that several
   targets see) and what it holds (size, modification time, CRC32 of its first and last 64 KiB: the same
   bytes on shared storage a machine mounts under another device number); the small files every share needs
   (a DCP ``.metadata``, an HF index) whole; ``trainer_state.json``'s step.
2. :func:`scan_share`: the parts (or the data files of a multi-file part) this machine was given to read,
   read as a local scan reads them; progress on stderr as it goes (``trainprobe-progress FILES/TOTAL
   BYTES/TOTAL``).

The plan (who reads what) and the merge into one report live in :mod:`trainprobe.checkpoint.shard_plan`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import sys
import time
import zlib
from typing import Any

from trainprobe.checkpoint.reading.formats import detect
from trainprobe.checkpoint.safe_io import read_side, walk
from trainprobe.checkpoint.scan import PartRequest, read_parts
from trainprobe.checkpoint.units.frameworks import Part

_EDGE = 64 << 10
_CONTENT = (".metadata", ".index.json")  # read whole into the inventory: every share of their part needs them
_MAX_CONTENT = 256 << 20
PROGRESS = "trainprobe-progress"


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return socket.gethostname()


def _edges_crc(path: str, size: int) -> int:
    """CRC32 of the first and the last 64 KiB: cheap, and different for files that differ anywhere a
    re-save or a copy of another step changes (headers, the zip directory at the end)."""
    with open(path, "rb") as fh:
        crc = zlib.crc32(fh.read(_EDGE))
        if size > _EDGE:
            fh.seek(max(_EDGE, size - _EDGE))
            crc = zlib.crc32(fh.read(_EDGE), crc)
    return crc


def inventory(path: str) -> dict[str, Any]:
    """What this machine has of the unit ``path`` (a directory): one entry per regular file under it."""
    out: dict[str, Any] = {"path": path, "host": socket.gethostname(), "boot": _boot_id(), "files": []}
    if not os.path.isdir(path):
        out["kind"] = "file" if os.path.exists(path) else "missing"
        return out
    out["kind"] = "dir"
    not_read: list[tuple[str, str]] = []
    for folder, _dirs, files in walk(path, not_read):
        for name in files:
            full = os.path.join(folder, name)
            try:
                st = os.stat(full, follow_symlinks=False)
            except OSError:
                continue
            if not os.path.isfile(full) or os.path.islink(full):
                continue
            entry: dict[str, Any] = {
                "rel": os.path.relpath(full, path),
                "size": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "dev": st.st_dev,
                "ino": st.st_ino,
                "crc": _edges_crc(full, st.st_size),
                "readable": detect(full) is not None,
            }
            if name.endswith(_CONTENT) and st.st_size <= _MAX_CONTENT:
                with contextlib.suppress(OSError):
                    entry["content"] = base64.b64encode(read_side(full, _MAX_CONTENT)).decode("ascii")
            if name == "trainer_state.json":
                try:
                    step = json.loads(read_side(full)).get("global_step")
                    entry["global_step"] = (
                        step if isinstance(step, int) and not isinstance(step, bool) else None
                    )
                except (OSError, ValueError, AttributeError):
                    entry["global_step"] = None
            out["files"].append(entry)
    out["not_read"] = [{"path": p, "why": why} for p, why in not_read]
    return out


class Progress:
    """A share's progress on stderr (``trainprobe-progress FILES/TOTAL BYTES/TOTAL``), at most twice a second
    and once per finished part: the coordinator shows it per target."""

    def __init__(self, files: int, total: int) -> None:
        self.files, self.total = files, total
        self.files_done = self.bytes_done = 0
        self.part_bytes, self.part_fraction = 0, 0.0
        self.last = 0.0

    def start(self, size: int) -> None:
        self.part_bytes, self.part_fraction = size, 0.0

    def advance(self, fraction: float) -> None:
        self.part_fraction += fraction
        if time.monotonic() - self.last > 0.5:
            self.emit()

    def finish(self, files: int) -> None:
        self.files_done += files
        self.bytes_done += self.part_bytes
        self.part_bytes, self.part_fraction = 0, 0.0
        self.emit()

    def emit(self) -> None:
        self.last = time.monotonic()
        now = self.bytes_done + int(self.part_bytes * min(1.0, self.part_fraction))
        print(f"{PROGRESS} {self.files_done}/{self.files} {now}/{self.total}", file=sys.stderr, flush=True)


def scan_share(
    path: str, requests: list[dict[str, Any]], *, stats: bool = False, verify: bool = False
) -> dict[str, Any]:
    """Read the parts of ``requests`` (from the plan) here: one read per request, in order, and how much
    was read (``files``, ``bytes``, ``seconds``)."""
    started = time.perf_counter()
    parsed = [part_request(r) for r in requests]
    sizes = [request_bytes(r) for r in parsed]
    counts = [len(r.files) if r.files is not None else 1 for r in parsed]
    progress = Progress(sum(counts), sum(sizes))
    reads = []
    for request, size, count in zip(parsed, sizes, counts, strict=True):
        progress.start(size)
        reads.extend(read_parts([request], stats=stats, verify=verify, progress=progress.advance))
        progress.finish(count)
    return {
        "reads": [r.to_json() for r in reads],
        "files": progress.files,
        "bytes": progress.total,
        "seconds": time.perf_counter() - started,
    }


def part_request(r: dict[str, Any]) -> PartRequest:
    """One request of the plan (:func:`trainprobe.checkpoint.shard_plan.plan_shards`) as a PartRequest."""
    return PartRequest(
        Part(r["part"], r["role"]),
        r["unit"],
        r["framework"],
        tuple(r["files"]) if r.get("files") is not None else None,
        base64.b64decode(r["description"]) if r.get("description") else None,
    )


def request_bytes(request: PartRequest) -> int:
    """The bytes a request reads here: its file, or its data files."""
    path = request.part.path
    if request.files is None:
        names = [path] if not os.path.isdir(path) else [os.path.join(path, f) for f in os.listdir(path)]
    else:
        folder = os.path.dirname(path) if path.endswith(".index.json") else path
        names = [os.path.join(folder, f) for f in request.files]
    return sum(os.path.getsize(n) for n in names if os.path.isfile(n))
