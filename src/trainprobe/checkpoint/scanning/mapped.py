"""The NaN/Inf pass of a large contiguous tensor read from its file's map itself, under a read lease.

:func:`~trainprobe.checkpoint.numerics.plan_nonfinite` copies each block of a large tensor with ``pread``
first, so that a file cut while it is read is an error, never a SIGBUS; that copy costs more than the check
(on two cores the pass stayed at the one-core floor's time whatever the threads). Where the file is held by a
read lease (:mod:`trainprobe.checkpoint.reading.lease`) it cannot be cut while a block is read, so the pieces
of :func:`plan_mapped` read the map directly, the lease found whole before each block: from the block where a
writer broke it, the rest is read with ``pread``, as without a lease (a file the writer then cuts is "changed
while read"; one it only opened reads on to the same report). The pieces count, locate and fingerprint
exactly as ``plan_nonfinite``'s (its ``finish`` combines them), so the report is the same whichever reads a
tensor and whatever the threads. Stdlib + numpy only."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from trainprobe.checkpoint import numerics
from trainprobe.checkpoint.bits import all_finite, bad_mask, classify
from trainprobe.checkpoint.fingerprint import Fingerprinter, stored_fingerprint
from trainprobe.checkpoint.numerics import NonFinite, Piece, block_releaser, plan_nonfinite, stable_blocks
from trainprobe.checkpoint.reading.base import TensorRecord
from trainprobe.checkpoint.reading.lease import Lease
from trainprobe.checkpoint.threads import Plan

Array = np.ndarray[Any, Any]

#: Tensors smaller than this are left to ``plan_nonfinite`` (it reads them from the map already, after a
#: size check: a window of one block).
MAPPED_MIN = 1 << 20
#: Bytes of a tensor read per look at the lease (and per call to ``all_finite``): a writer that breaks the
#: lease waits for at most this much to be read.
MAPPED_BLOCK = 4 << 20
#: Bytes of a tensor read before their pages are dropped, at once, from the resident set: each drop is a TLB
#: flush on every core the threads run on, and one per 16 MB piece cost a fifth of a two-thread scan.
RELEASE_BYTES = 64 << 20


def plan_mapped(record: TensorRecord, lease: Lease | None, *, threaded: bool) -> Plan[Piece, NonFinite]:
    """The NaN/Inf and fingerprint plan of ``record``: its pieces read from the map under ``lease`` when it is
    a contiguous floating (or fingerprinted here) tensor of at least :data:`MAPPED_MIN` bytes inside the
    leased file; else ``plan_nonfinite``'s own. Raises as ``plan_nonfinite`` does."""
    base = plan_nonfinite(record, fingerprint=True, threaded=threaded)
    if lease is None or not base.jobs:
        return base
    view, _repeats = record.collapsed()
    info = view.dtype_info
    if info is None or info.kind == "complex":
        return base
    arr = view.array()
    end = view.storage.offset + view.storage.nbytes
    if not arr.flags.c_contiguous or arr.nbytes < MAPPED_MIN or end > lease.size:
        return base
    how = (info.is_floating, stored_fingerprint(record) is None)
    itemsize = max(1, arr.itemsize)
    step = max(1, numerics.PIECE_BYTES // itemsize)  # the module's, read now: a test may make it small
    flat = arr.reshape(-1)
    release = PrefixReleaser(block_releaser(view, arr), flat.size, max(1, RELEASE_BYTES // itemsize)).done
    jobs = [
        functools.partial(_mapped_piece, view, flat[start : start + step], start, how, lease, release)
        for start in range(0, flat.size, step)
    ]
    return Plan(jobs, base.finish)


class PrefixReleaser:
    """Drops the pages of a tensor's elements read, ``every`` elements at a time, whichever thread read
    them: pieces are told done in any order (``done(start, count)``), and the run of elements from the
    first one that are all done is released once it has grown by ``every`` (and when it reaches the end,
    ``total``). The resident window: the pieces being read and less than ``every`` behind them."""

    def __init__(self, release: Callable[[int, int], None], total: int, every: int) -> None:
        self._release = release
        self._total = total
        self._every = every
        self._lock = threading.Lock()
        self._done: dict[int, int] = {}  # start -> count, of pieces done past the run
        self._run = 0  # elements [0, run) all done
        self._released = 0

    def done(self, start: int, count: int) -> None:
        with self._lock:
            self._done[start] = count
            while self._run in self._done:
                self._run += self._done.pop(self._run)
            if self._run - self._released < self._every and self._run < self._total:
                return
            lo = self._released
            hi = self._released = self._run
        if hi > lo:
            self._release(lo, hi - lo)


def _blocks(record: TensorRecord, arr: Array, first: int, lease: Lease) -> Iterator[tuple[int, Array]]:
    """(index in ``arr``, block) over ``arr``, the elements of ``record`` from flat index ``first`` on: from
    the map while ``lease`` holds (each block read before the next is asked for), the rest, from the block
    where a writer broke it, with ``pread`` (as a tensor without a lease is read: a file cut meanwhile raises
    "changed while read", one only opened for writing reads on)."""
    per = max(1, MAPPED_BLOCK // max(1, arr.itemsize))
    for start in range(0, arr.size, per):
        if not lease.enter():
            rest = stable_blocks(record, arr[start:], per, first + start, threaded=True)
            yield from ((start + at, block) for at, block in rest)
            return
        try:
            yield start, arr[start : start + per]
        finally:
            lease.leave()


def _mapped_piece(
    record: TensorRecord,
    arr: Array,
    first: int,
    how: tuple[bool, bool],
    lease: Lease,
    release: Callable[[int, int], None],
) -> Piece:
    """One piece of a tensor, ``arr`` (its elements from flat index ``first`` on), read from the map block by
    block while ``lease`` holds; ``how``: whether it is floating (counted) and hashed here."""
    floating, hashing = how
    hasher = Fingerprinter() if hashing else None
    dtype = record.dtype
    nan = pinf = ninf = 0
    bad: int | None = None
    for start, block in _blocks(record, arr, first, lease):
        finite = not floating or all_finite(dtype, block)
        if hasher is not None:
            hasher.update(block)
        if not finite:
            a, b, c = classify(dtype, block)
            nan, pinf, ninf = nan + a, pinf + b, ninf + c
            if bad is None:
                bad = first + start + int(np.flatnonzero(bad_mask(dtype, block))[0])
    release(first, arr.size)
    crc, nbytes = hasher.state() if hasher is not None else (0, 0)
    return Piece(nan, pinf, ninf, bad, crc, nbytes)
