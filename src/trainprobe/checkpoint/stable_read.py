"""Tensor data read so that a checkpoint re-saved in place (truncated while it is read) is reported as
"changed while read" (unreadable, exit 2) instead of killing the process with SIGBUS.

Touching a page of a memory map past the end of a file that shrank raises SIGBUS, which no Python code can
catch. A check before the touch (the file's size, ``mincore``) does not help: a scan spends nearly all its
time touching pages, so a cut lands inside a touch, after its check. So the map of a contiguous tensor is
touched only while the file cannot shrink: under a read lease (``fcntl(F_SETLEASE, F_RDLCK)``, Linux) on its
inode, taken per piece of the tensor on a descriptor of its own. While a lease is held, any ``truncate``,
``open(O_TRUNC)`` or open for writing of that inode, by any process, waits in the kernel until the lease
is let go (or ``/proc/sys/fs/lease-break-time``, 45 s by default, has passed); such a wait shows here as
``F_GETLEASE`` no longer answering ``F_RDLCK``. That is asked before each block of the map is handed out
(a block takes well under a millisecond to check): once a break is pending, the lease is let go at once
(the writer goes on) and the rest of the piece is read with ``os.preadv`` into one reusable buffer, where a
short read is the error. The lease is refused while any process holds the file open for writing (a save
in progress), to a user who neither owns the file nor has CAP_LEASE, and on filesystems without leases
(NFS, FUSE): those pieces are read with ``preadv`` from the start, as they always were. The one case left
open is a block whose check and use are more than the lease-break time apart (45 s for a 1 MiB block: a
process stopped mid-block); below :data:`MIN_BREAK_SECONDS` of break time no lease is taken.

The lease's break signal is moved to SIGURG (ignored by default; no lease is taken if this process handles
SIGURG) before the lease is asked for, and the lease's owner cleared at once, so no signal is ever sent:
the kernel would otherwise send SIGIO, which kills the process. A file replaced by a new one (renamed over)
leaves the map whole (the old inode lives on), so that tensor is read from the map. Small tensors, and
strided views, are read from the map after an ``fstat`` that the file still holds their storage (a window
of one block, not of the scan). Stdlib + numpy only.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import signal
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
#: Bytes per block handed out straight from the map under a lease: the NaN pass's temporaries (a bool per
#: element) stay in the L2 cache, and a pending break waits on at most one such block.
MAP_BLOCK = 1 << 20
#: No lease below this break time: a block must be done long before the kernel breaks the lease itself.
MIN_BREAK_SECONDS = 5


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


def _break_seconds() -> int:
    try:
        with open("/proc/sys/fs/lease-break-time") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


_LEASES: list[bool] = []  # whether leases may be taken here: found out once per process


def _leases_usable() -> bool:
    if not _LEASES:
        usable = all(hasattr(fcntl, name) for name in ("F_SETLEASE", "F_GETLEASE", "F_SETSIG", "F_SETOWN"))
        _LEASES.append(usable and _break_seconds() >= MIN_BREAK_SECONDS)
    # Asked each time: a handler set later would be sent the break signal in the moment before the owner
    # is cleared.
    return _LEASES[0] and signal.getsignal(signal.SIGURG) in (signal.SIG_DFL, signal.SIG_IGN)


def take_lease(fd: int) -> bool:
    """A read lease on ``fd``'s inode, its break signal never sent; False where none can be had (a writer
    has the file open, not its owner, a filesystem without leases)."""
    if not _leases_usable():
        return False
    try:
        # What the kernel would send in the moment before the owner is cleared: ignored, unlike SIGIO.
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except OSError:
        return False
    try:
        fcntl.fcntl(fd, fcntl.F_SETOWN, 0)  # no owner: a break is only seen by asking (held())
    except OSError:
        let_go(fd)
        return False
    return True


def held(fd: int) -> bool:
    """Whether ``fd``'s lease is held and no one waits to break it (during a break the kernel answers the
    type the lease is to become)."""
    try:
        return bool(fcntl.fcntl(fd, fcntl.F_GETLEASE) == fcntl.F_RDLCK)
    except OSError:
        return False


def let_go(fd: int) -> None:
    with contextlib.suppress(OSError):  # the descriptor's close lets it go in any case
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)


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
    flat blocks: views of the map while a lease is held, else read by ``pread`` into one buffer, reused (use
    each block before asking for the next); any other from ``blocks`` over the map, each after a size
    check. ``pread_block``: bytes per pread."""
    fd = _open_same(record) if arr.flags.c_contiguous and arr.nbytes >= PREAD_MIN else None
    if fd is None:
        guard = size_guard(record)
        for start, block in blocks(arr, max_elems):
            guard()
            yield start, block
        return
    try:
        yield from _contiguous(record, arr, max_elems, first, fd, pread_block)
    finally:
        os.close(fd)  # lets the lease go, if one is still held


def _contiguous(
    record: TensorRecord, arr: Array, max_elems: int, first: int, fd: int, pread_block: int
) -> Iterator[tuple[int, Array]]:
    n, itemsize = arr.size, arr.itemsize
    flat = arr.reshape(-1)
    base = record.storage.offset + (record.storage_offset + first) * itemsize
    leased = take_lease(fd)
    # Under the lease the file cannot shrink: what it holds now it holds until a break is pending.
    if leased and os.fstat(fd).st_size < base + n * itemsize:
        let_go(fd)
        leased = False  # preadv finds where it ends and says so
    done = 0
    if leased:
        step = max(1, min(max_elems, MAP_BLOCK // itemsize))
        while done < n and held(fd):
            yield done, flat[done : done + step]
            done += step
        let_go(fd)  # done, or a writer waits: it goes on, and the rest is read by preadv
    step = max(1, min(max_elems, pread_block // itemsize))  # a block the caches hold
    buf: Array | None = None
    for start in range(done, n, step):
        count = min(step, n - start)
        if buf is None:
            buf = np.empty(min(step, n - start), dtype=arr.dtype)
        want = count * itemsize
        at = base + start * itemsize
        got = os.preadv(fd, [buf.view(np.uint8).data[:want]], at)
        if got != want:
            raise changed(record, at + want, at + got)
        yield start, buf[:count]
