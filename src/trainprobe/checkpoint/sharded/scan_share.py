"""A checkpoint unit scanned where its files are, on several machines (``scan --on FLEET --sharded PATH``):
the far side's second call. :func:`scan_share` reads the parts (or the data files of a multi-file part) this
machine was given (by :func:`.plan.plan_shards`), as a local scan reads them, with progress on stderr as it
goes (``trainprobe-progress FILES/TOTAL BYTES/TOTAL``). Shipped with trainprobe.checkpoint: stdlib + numpy."""

from __future__ import annotations

import base64
import os
import sys
import time
from typing import Any

from trainprobe.checkpoint.scanning.run import PartRequest, read_parts
from trainprobe.checkpoint.units.frameworks import Part

PROGRESS = "trainprobe-progress"


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
    parsed, sizes, counts, progress = parse_share(requests)
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


def parse_share(requests: list[dict[str, Any]]) -> tuple[list[PartRequest], list[int], list[int], Progress]:
    """A share's requests (from the plan) parsed, the bytes and the files each reads here, and the share's
    progress over them all."""
    parsed = [part_request(r) for r in requests]
    sizes = [request_bytes(r) for r in parsed]
    counts = [len(r.files) if r.files is not None else 1 for r in parsed]
    return parsed, sizes, counts, Progress(sum(counts), sum(sizes))


def part_request(r: dict[str, Any]) -> PartRequest:
    """One request of the plan (:func:`.plan.plan_shards`) as a PartRequest."""
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
