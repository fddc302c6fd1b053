"""Tensor data read so that a checkpoint re-saved in place (truncated while it is read) is reported as
"changed while read" (unreadable, exit 2) instead of killing the process with SIGBUS.

Touching a page of a memory map past the end of a file that shrank raises SIGBUS, which no Python code can
catch. So the NaN/Inf pass of a contiguous tensor of a mapped file does not touch the map: it reads each
block with ``os.preadv`` into one reusable buffer (a short read is the error), from a descriptor opened on
the same inode the map shows. A file replaced by a new one (renamed over) leaves the map whole (the old
inode lives on), so that tensor is read from the map. Small tensors, and strided views, are read from the
map after an ``fstat`` that the file still holds their storage (a window of one block, not of the scan).
Stdlib + numpy only.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from trainprobe.checkpoint.reading.base import TensorRecord
from trainprobe.checkpoint.reading.mapping import MAPPED
from trainprobe.checkpoint.safe_io import CHANGED_WHILE_READ
from trainprobe.errors import CheckpointError

Array = np.ndarray[Any, Any]
Blocks = Callable[[Array, int], Iterator[tuple[int, Array]]]

#: Tensors of at least this many bytes are read with pread.
PREAD_MIN = 1 << 20
#: Bytes per pread: small enough that the copy is still in cache when the NaN pass reads it.
PREAD_BLOCK = 512 << 10
#: Bytes per pread when several threads read: each pread and each numpy call hands the GIL over, and on a
#: busy machine a thread that has to wait for it may wait for a CPU too, so threads take blocks four times
#: larger (still in the shared L3 cache), a quarter of the handovers.
THREADED_PREAD_BLOCK = 2 << 20


def changed(record: TensorRecord, end: int, now: int) -> CheckpointError:
    return CheckpointError(
        record.file,
        f"{CHANGED_WHILE_READ}: tensor {record.name} needs bytes up to {end:,} but the file now holds "
        f"{max(now, 0):,}",
        hint="it was re-saved or truncated while trainprobe read it; read it again once it is whole",
    )


def size_guard(record: TensorRecord) -> Callable[[], None]:
    """A check, made before a block of the map is touched, that the file still holds the storage."""
    buffer = record.storage.buffer
    if not isinstance(buffer, mmap.mmap):
        return lambda: None
    end = record.storage.offset + record.storage.nbytes

    def check() -> None:
        try:
            now = buffer.size()
        except (OSError, ValueError):
            now = -1
        if now < end:
            raise changed(record, end, now)

    return check


def _open_same(record: TensorRecord) -> int | None:
    """A descriptor on the inode the record's map shows, or None (not a map of a file, or replaced)."""
    buffer = record.storage.buffer
    seen = MAPPED.get(buffer) if isinstance(buffer, mmap.mmap) else None
    if seen is None:
        return None
    path, dev, ino = seen
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (dev, ino):
        os.close(fd)
        return None
    return fd


def read_blocks(
    record: TensorRecord,
    arr: Array,
    max_elems: int,
    blocks: Blocks,
    first: int = 0,
    *,
    pread_block: int = PREAD_BLOCK,
) -> Iterator[tuple[int, Array]]:
    """(flat index in ``arr`` of the first element, block) over ``arr``, the elements of ``record`` (of a
    contiguous one: from flat index ``first`` on, a piece of it), in C order. A contiguous tensor comes as
    flat blocks read by ``pread`` (one buffer, reused: use each block before asking for the next); any
    other from ``blocks`` over the map, each after a size check. ``pread_block``: bytes per pread."""
    fd = _open_same(record) if arr.flags.c_contiguous and arr.nbytes >= PREAD_MIN else None
    if fd is None:
        guard = size_guard(record)
        for start, block in blocks(arr, max_elems):
            guard()
            yield start, block
        return
    try:
        n = arr.size
        itemsize = arr.itemsize
        max_elems = max(1, min(max_elems, pread_block // itemsize))  # a block the caches hold
        base = record.storage.offset + (record.storage_offset + first) * itemsize
        buf = np.empty(min(max_elems, n), dtype=arr.dtype)
        raw = buf.view(np.uint8).data
        for start in range(0, n, max_elems):
            count = min(max_elems, n - start)
            want = count * itemsize
            at = base + start * itemsize
            got = os.preadv(fd, [raw[:want]], at)
            if got != want:
                raise changed(record, at + want, at + got)
            yield start, buf[:count]
    finally:
        os.close(fd)
