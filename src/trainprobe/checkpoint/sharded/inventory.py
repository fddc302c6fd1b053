"""A checkpoint unit scanned or checked where its files are, on several machines (``--on FLEET --sharded
PATH``): the far side's first call. :func:`inventory` lists the files of PATH this machine has, each with what
tells one file from another file of the same name — where it lives (the boot, the device and the inode: the
same file on storage that several targets see) and what it holds (size, modification time, CRC32 of its first
and last 64 KiB: the same bytes on shared storage a machine mounts under another device number); the small
files every share needs (a DCP ``.metadata``, an HF index) whole; ``trainer_state.json``'s step.

Who reads what is :mod:`.plan`'s; the reads are :mod:`.scan_share`'s and :mod:`.check_share`'s, their merge
into one report :mod:`.merge`'s. Shipped with trainprobe.checkpoint: stdlib + numpy.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import zlib
from typing import Any

from trainprobe.checkpoint.reading.formats import detect
from trainprobe.checkpoint.safe_io import read_side, walk

#: How much of each end of a file its edge CRC covers (a file up to twice this is covered whole).
EDGE_BYTES = 64 << 10
_CONTENT = (".metadata", ".index.json")  # read whole into the inventory: every share of their part needs them
_MAX_CONTENT = 256 << 20


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
        crc = zlib.crc32(fh.read(EDGE_BYTES))
        if size > EDGE_BYTES:
            fh.seek(max(EDGE_BYTES, size - EDGE_BYTES))
            crc = zlib.crc32(fh.read(EDGE_BYTES), crc)
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
