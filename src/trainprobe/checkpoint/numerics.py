"""Exact NaN / +Inf / −Inf counts and summary statistics for one tensor, in bounded memory.

The fast path is one chunked pass that only asks "is every element finite?" (a bit mask for bfloat16 and
float8: :mod:`trainprobe.checkpoint.bits` has the rules per dtype); exact counts and the first bad index are
computed only for the chunks that fail it. A large tensor is cut into pieces of :data:`PIECE_BYTES`, each a
job for any thread (:mod:`trainprobe.checkpoint.threads`); what they find is combined in piece order (counts
added, the first bad index of the first piece that has one, CRC32s joined), so the answer is the same
whatever the number of threads.

Complex: an element is bad if either part is; it counts as NaN if either part is NaN, else as +Inf if
either part is +Inf, else as −Inf."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainprobe.checkpoint.bits import all_finite, bad_mask, classify, f8_lookup
from trainprobe.checkpoint.fingerprint import Fingerprinter, combine_crc32, crc_digest, stored_fingerprint
from trainprobe.checkpoint.reading.base import TensorRecord
from trainprobe.checkpoint.reading.mapping import page_releaser
from trainprobe.checkpoint.threads import Plan

# Per chunk: at most 8 MiB of data and 2 Mi elements, so the temporaries (a bool mask, a masked copy of the
# bits) stay a few MiB per thread; measured no slower than 16 MiB chunks.
CHUNK_BYTES = 8 << 20
CHUNK_ELEMS = 2 << 20
#: A tensor larger than this is read in pieces of this size, each a job for any thread: one tensor keeps
#: every core busy. A constant (never from the number of threads), so the pieces are the same for any.
PIECE_BYTES = 16 << 20

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class NonFinite:
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    first_bad_index: tuple[int, ...] | None = None
    fingerprint: str | None = None  # with ``count_nonfinite(..., fingerprint=True)``

    @property
    def total(self) -> int:
        return self.nan + self.posinf + self.neginf


@dataclass(frozen=True)
class Stats:
    """Over the finite elements only (NaN/Inf are counted separately); None where there are no finite
    elements."""

    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    absmax: float | None
    l2: float | None
    zero_fraction: float | None


def blocks(arr: Array, max_elems: int) -> Iterator[tuple[int, Array]]:
    """Split ``arr`` into views of at most ``max_elems`` elements along leading axes, in C order.

    Yields (flat index of the block's first element, block). Works on any strided view without copying it.
    """
    if arr.size <= max_elems or arr.ndim == 0:
        yield 0, arr
        return
    row = arr.size // arr.shape[0]
    if row <= max_elems:
        rows = max(1, max_elems // row)
        for i in range(0, arr.shape[0], rows):
            yield i * row, arr[i : i + rows]
        return
    for i in range(arr.shape[0]):
        for start, sub in blocks(arr[i], max_elems):
            yield i * row + start, sub


def _complex_parts(arr: Array, dtype: str) -> tuple[Array, Array]:
    if dtype == "complex32":  # float16 pairs on a trailing axis
        return arr[..., 0], arr[..., 1]
    return arr.real, arr.imag


def block_releaser(record: TensorRecord, arr: Array) -> Callable[[int, int], None]:
    """For a contiguous tensor in a file mapping: a function that drops the pages of elements already checked.

    The pages stay in the page cache; they only leave this process's resident set, so RSS stays at a few
    chunks whatever the checkpoint's size. Only whole pages inside the range are dropped (a page shared with
    another tensor, which another thread may be reading, is kept).
    """
    if not arr.flags.c_contiguous:
        return lambda _start, _count: None
    release_bytes = page_releaser(record.storage.buffer)
    base = record.storage.offset + record.storage_offset * arr.itemsize
    itemsize = arr.itemsize

    def release(start: int, count: int) -> None:
        release_bytes(base + start * itemsize, base + (start + count) * itemsize)

    return release


def stable_blocks(
    record: TensorRecord, arr: Array, max_elems: int, first: int = 0, *, threaded: bool = False
) -> Iterator[tuple[int, Array]]:
    """:func:`blocks` of a tensor (``arr``: its elements from flat index ``first`` on), read so that a file
    truncated meanwhile is an error, never a SIGBUS (:mod:`trainprobe.checkpoint.stable_read`); ``threaded``:
    read beside other threads (larger reads)."""
    from trainprobe.checkpoint.stable_read import PREAD_BLOCK, THREADED_PREAD_BLOCK, read_blocks

    block = THREADED_PREAD_BLOCK if threaded else PREAD_BLOCK
    return read_blocks(record, arr, max_elems, blocks, first, pread_block=block)


@dataclass(frozen=True)
class Piece:
    """What one piece of a tensor holds: its NaN/+Inf/−Inf counts, the flat index of its first bad element,
    and the CRC32 of its bytes with their count (when fingerprinted here)."""

    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    first: int | None = None
    crc: int = 0
    nbytes: int = 0


def count_nonfinite(
    record: TensorRecord,
    chunk_bytes: int = CHUNK_BYTES,
    *,
    fingerprint: bool = False,
    workers: int | None = None,
) -> NonFinite:
    """Exact NaN/+Inf/−Inf counts and the first bad index of a floating tensor (zeros for other dtypes).

    Counts are per element, as ``torch.isnan(t).sum()`` counts them. An axis of stride 0 (``expand``)
    repeats the same stored values: it is read once and its counts multiplied (a 1.5 kB tensor of 10^15
    elements takes microseconds; a NaN in it counts 10^15 times and its first bad index is the first place
    it shows). ``fingerprint``: also the tensor's fingerprint (:mod:`trainprobe.checkpoint.fingerprint`), from
    the container's stored CRC32 when it has one, else computed on the blocks this pass reads anyway (for an
    expanded tensor: its stored values, and its shape). A tensor of more than :data:`PIECE_BYTES` is read
    in pieces by several threads (``workers``; 1: in this thread), with the same answer."""
    plan = plan_nonfinite(record, chunk_bytes, fingerprint=fingerprint, threaded=workers != 1)
    return plan.run(workers)


def plan_nonfinite(
    record: TensorRecord, chunk_bytes: int = CHUNK_BYTES, *, fingerprint: bool = False, threaded: bool = False
) -> Plan[Piece, NonFinite]:
    """:func:`count_nonfinite` as a :class:`~trainprobe.checkpoint.threads.Plan`: one job per piece of the
    tensor (pieces of :data:`PIECE_BYTES`, whatever the threads), combined in order; ``threaded``: its jobs
    run beside other threads (they read larger blocks; the answer is the same). Raises as the tensor's view
    does (a damaged shape) when it is made."""
    stored = stored_fingerprint(record) if fingerprint else None
    hashing = fingerprint and stored is None
    view, repeats = record.collapsed()

    def finish(pieces: list[Piece]) -> NonFinite:
        first = next((p.first for p in pieces if p.first is not None), None)
        index = None if first is None else tuple(int(i) for i in np.unravel_index(first, view.shape))
        digest = stored
        if hashing:
            digest = crc_digest(*combine_crc32([(p.crc, p.nbytes) for p in pieces]))
            digest = digest if repeats == 1 else f"{digest}:expanded{list(record.shape)}"
        nan, pinf, ninf = (
            sum(p.nan for p in pieces),
            sum(p.posinf for p in pieces),
            sum(p.neginf for p in pieces),
        )
        return NonFinite(nan * repeats, pinf * repeats, ninf * repeats, index, digest)

    info = view.dtype_info
    floating = info is not None and info.is_floating
    if not record.numel or not (floating or hashing):
        return Plan([], finish)
    arr = view.array()
    if info is not None and info.kind == "complex":
        return Plan([functools.partial(_count_complex, arr, view.dtype, chunk_bytes, hashing)], finish)
    itemsize = max(1, arr.dtype.itemsize)
    max_elems = max(1, min(chunk_bytes // itemsize, CHUNK_ELEMS) if floating else chunk_bytes // itemsize)
    release = block_releaser(view, arr)
    if arr.flags.c_contiguous and arr.nbytes > PIECE_BYTES:
        flat, step = arr.reshape(-1), max(1, PIECE_BYTES // itemsize)
        pieces = [(start, flat[start : start + step]) for start in range(0, flat.size, step)]
    else:  # a strided view is one piece (read from the map; rare, and never large in practice)
        pieces = [(0, arr)]
    return Plan(
        [
            functools.partial(
                _count_piece, view, piece, start, max_elems, (floating, hashing, threaded), release
            )
            for start, piece in pieces
        ],
        finish,
    )


def _count_piece(
    record: TensorRecord,
    arr: Array,
    first: int,
    max_elems: int,
    how: tuple[bool, bool, bool],
    release: Callable[[int, int], None],
) -> Piece:
    """One piece of a tensor: ``arr``, its elements from flat index ``first`` on; ``how``: whether it is
    floating (counted), hashed (fingerprinted here) and read beside other threads."""
    floating, hashing, threaded = how
    hasher = Fingerprinter() if hashing else None
    dtype = record.dtype
    nan = pinf = ninf = 0
    bad: int | None = None
    for start, block in stable_blocks(record, arr, max_elems, first, threaded=threaded):
        finite = not floating or all_finite(dtype, block)
        if hasher is not None:
            hasher.update(block)
        if finite:
            continue
        a, b, c = classify(dtype, block)
        nan, pinf, ninf = nan + a, pinf + b, ninf + c
        if bad is None:
            bad = first + start + int(np.flatnonzero(bad_mask(dtype, block))[0])
    # Once per piece, not per block: with several threads each release is a TLB shootdown on every core
    # (it cost as much as the NaN pass itself); a piece's pages are a bounded window (PIECE_BYTES a job).
    release(first, arr.size)
    crc, nbytes = hasher.state() if hasher is not None else (0, 0)
    return Piece(nan, pinf, ninf, bad, crc, nbytes)


def _count_complex(arr: Array, dtype: str, chunk_bytes: int, hashing: bool) -> Piece:
    real, imag = _complex_parts(arr, dtype)
    max_elems = max(1, min(chunk_bytes // (2 * real.dtype.itemsize), CHUNK_ELEMS))
    nan = pinf = ninf = 0
    first: int | None = None
    hasher = Fingerprinter() if hashing else None
    if hasher is not None:
        for _start, block in blocks(arr, max(1, min(chunk_bytes // arr.dtype.itemsize, CHUNK_ELEMS))):
            hasher.update(block)
    for (start, re), (_, im) in zip(blocks(real, max_elems), blocks(imag, max_elems), strict=True):
        if np.isfinite(re).all() and np.isfinite(im).all():
            continue
        is_nan = np.isnan(re) | np.isnan(im)
        is_pinf = ~is_nan & (np.isposinf(re) | np.isposinf(im))
        is_ninf = ~is_nan & ~is_pinf & (np.isneginf(re) | np.isneginf(im))
        nan += int(np.count_nonzero(is_nan))
        pinf += int(np.count_nonzero(is_pinf))
        ninf += int(np.count_nonzero(is_ninf))
        if first is None:
            first = start + int(np.flatnonzero(is_nan | is_pinf | is_ninf)[0])
    crc, nbytes = hasher.state() if hasher is not None else (0, 0)
    return Piece(nan, pinf, ninf, first, crc, nbytes)


def sum_of_squares(values: Array) -> float:
    """The sum of ``values``' squares by numpy's own pairwise sum, not BLAS's dot: a dot's kernel and its
    blocking are BLAS's choice, per process and per thread count, so the same numbers read here and on a far
    machine could differ in the last bit — and the documents of one file must be equal wherever it is read."""
    return float(np.square(values).sum())


def as_float(dtype: str, block: Array) -> Array:
    """Decode a block to float64 values (bfloat16/float8 from their bits; complex as magnitudes)."""
    if dtype == "bfloat16":
        out: Array = (block.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return out
    if dtype.startswith("float8"):
        return f8_lookup(dtype)[block].astype(np.float64)
    if np.iscomplexobj(block):
        return np.abs(block).astype(np.float64)
    return block.astype(np.float64)


def compute_stats(
    record: TensorRecord, chunk_elems: int = 1 << 20, *, workers: int | None = None
) -> Stats | None:
    """min, max, mean, std, absmax, L2 norm and zero fraction over the finite elements (complex:
    magnitudes); a large tensor's blocks summed by several threads (``workers``), combined in block order,
    so the floating sums are the same whatever the threads."""
    return plan_stats(record, chunk_elems).run(workers)


# Per block of a tensor: finite elements, zeros among them, their sum, sum of squares, min, max, absmax.
_Moments = tuple[int, int, float, float, float, float, float]


def plan_stats(record: TensorRecord, chunk_elems: int = 1 << 20) -> Plan[list[_Moments], Stats | None]:
    """:func:`compute_stats` as a :class:`~trainprobe.checkpoint.threads.Plan`: a job per run of whole blocks
    (about :data:`PIECE_BYTES`), each block's sums kept apart, added up in block order by ``finish``."""
    info = record.dtype_info
    if info is None or info.kind == "opaque" or record.numel == 0:
        return Plan([], lambda _parts: None)
    # An expanded tensor's repeated values weigh as often as they show: mean, std and extremes are those
    # of its stored values, the L2 norm grows with the square root of the repeats.
    record, repeats = record.collapsed()
    arr = record.array()
    if record.dtype == "complex32":
        arr = arr.astype(np.float32).view(np.complex64)[..., 0]
    chunks = [block for _start, block in blocks(arr, chunk_elems)]
    per = max(1, PIECE_BYTES // max(1, chunk_elems * arr.dtype.itemsize))
    jobs = [
        functools.partial(_moments, record.dtype, chunks[i : i + per]) for i in range(0, len(chunks), per)
    ]
    return Plan(jobs, functools.partial(_stats_of, repeats))


def _moments(dtype: str, chunks: list[Array]) -> list[_Moments]:
    out: list[_Moments] = []
    for block in chunks:
        values = as_float(dtype, block).ravel()
        values = values[np.isfinite(values)]
        if values.size:
            out.append(
                (
                    int(values.size),
                    int(np.count_nonzero(values == 0)),
                    float(values.sum()),
                    sum_of_squares(values),
                    float(values.min()),
                    float(values.max()),
                    float(np.abs(values).max()),
                )
            )
    return out


def _stats_of(repeats: int, parts: list[list[_Moments]]) -> Stats:
    count = zeros = 0
    total = sq = 0.0
    lo, hi, amax = math.inf, -math.inf, 0.0
    for c, z, s, q, low, high, peak in (m for part in parts for m in part):
        count, zeros, total, sq = count + c, zeros + z, total + s, sq + q
        lo, hi, amax = min(lo, low), max(hi, high), max(amax, peak)
    if count == 0:
        return Stats(None, None, None, None, None, None, None)
    mean = total / count
    var = max(sq / count - mean * mean, 0.0)
    return Stats(lo, hi, mean, math.sqrt(var), amax, math.sqrt(sq * repeats), zeros / count)


class NonFiniteTally:
    """count_nonfinite's counts, gathered chunk by chunk inside another pass over the same tensor."""

    def __init__(self, record: TensorRecord) -> None:
        self.record = record
        self.nan = self.posinf = self.neginf = 0
        self.first: int | None = None

    def add(self, start: int, block: np.ndarray[Any, Any]) -> None:
        dtype = self.record.dtype
        if all_finite(dtype, block):
            return
        a, b, c = classify(dtype, block)
        self.nan, self.posinf, self.neginf = self.nan + a, self.posinf + b, self.neginf + c
        if self.first is None:
            self.first = start + int(np.flatnonzero(bad_mask(dtype, block))[0])

    def result(self) -> NonFinite:
        first = self.first
        index = None if first is None else tuple(int(i) for i in np.unravel_index(first, self.record.shape))
        return NonFinite(self.nan, self.posinf, self.neginf, index)


class ChunkReleaser:
    """Drops the pages of a tensor's elements already checked from the resident set, a few MiB at a time
    (numerics' page releaser does the page arithmetic: whole pages only, shared ones kept)."""

    def __init__(self, record: TensorRecord, arr: np.ndarray[Any, Any]) -> None:
        self._release = block_releaser(record, arr)
        self._every = max(1, CHUNK_BYTES // max(1, arr.itemsize))
        self._start = self._end = 0

    def done(self, start: int, count: int) -> None:
        if start != self._end:
            self.flush()
            self._start = start
        self._end = start + count
        if self._end - self._start >= self._every:
            self.flush()

    def flush(self) -> None:
        if self._end > self._start:
            self._release(self._start, self._end - self._start)
        self._start = self._end


def flat(arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A contiguous tensor as a 1-D view (cheaper chunks); any other as it is (never copied)."""
    return arr.reshape(-1) if arr.flags.c_contiguous else arr
