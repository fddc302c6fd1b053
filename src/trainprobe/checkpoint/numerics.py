"""Exact NaN / +Inf / −Inf counts and summary statistics for one tensor, in bounded memory.

The fast path is one chunked pass that only asks "is every element finite?" (a bit mask for bfloat16 and
float8); exact counts and the first bad index are computed only for the chunks that fail it.

Per-dtype rules:
- float64/32/16: IEEE 754.
- bfloat16: IEEE-like; exponent bits 0x7F80 all set is Inf (mantissa 0) or NaN.
- float8_e5m2: IEEE-like; 0x7C/0xFC are ±Inf, exponent all ones with a mantissa is NaN.
- float8_e4m3fn: no Inf; only S.1111.111 (0x7F, 0xFF) is NaN.
- float8_e4m3fnuz, float8_e5m2fnuz: no Inf, no −0; only 0x80 is NaN.
- float8_e8m0fnu: an exponent only; 0xFF is NaN.
- complex: an element is bad if either part is; it counts as NaN if either part is NaN, else as +Inf if
either part is +Inf, else as −Inf."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainprobe.checkpoint.fingerprint import Fingerprinter, stored_fingerprint
from trainprobe.checkpoint.reading.base import TensorRecord
from trainprobe.checkpoint.reading.mapping import page_releaser

# Per chunk: at most 8 MiB of data and 2 Mi elements, so the temporaries (a bool mask, a masked copy of the
# bits) stay a few MiB per thread; measured no slower than 16 MiB chunks.
CHUNK_BYTES = 8 << 20
CHUNK_ELEMS = 2 << 20

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


# Masks over the raw bits of the dtypes numpy lacks: (value & exp_mask) == exp_mask marks "not finite", then
# NaN/+Inf/−Inf are told apart by exact patterns.
_BITS: dict[str, tuple[int, int, int | None, int | None]] = {
    # dtype: (exp_mask, sign_mask, +inf pattern, -inf pattern)
    "bfloat16": (0x7F80, 0x8000, 0x7F80, 0xFF80),
    "float8_e5m2": (0x7C, 0x80, 0x7C, 0xFC),
    "float8_e4m3fn": (0x7F, 0x80, None, None),
}
_SINGLE_NAN: dict[str, int] = {"float8_e4m3fnuz": 0x80, "float8_e5m2fnuz": 0x80, "float8_e8m0fnu": 0xFF}


def bad_mask(dtype: str, block: Array) -> Array:
    if dtype in _SINGLE_NAN:
        mask: Array = block == _SINGLE_NAN[dtype]
        return mask
    if dtype in _BITS:
        exp = _BITS[dtype][0]
        bits: Array = (block & exp) == exp
        return bits
    finite: Array = np.isfinite(block)
    return ~finite


def all_finite(dtype: str, block: Array) -> bool:
    if dtype in _SINGLE_NAN:
        return not bool((block == _SINGLE_NAN[dtype]).any())
    if dtype in _BITS:
        exp = _BITS[dtype][0]
        return not bool(((block & exp) == exp).any())
    return bool(np.isfinite(block).all())


def classify(dtype: str, block: Array) -> tuple[int, int, int]:
    if dtype in _SINGLE_NAN:
        return int(np.count_nonzero(block == _SINGLE_NAN[dtype])), 0, 0
    if dtype in _BITS:
        exp, _sign, pinf, ninf = _BITS[dtype]
        bad = (block & exp) == exp
        n_bad = int(np.count_nonzero(bad))
        if pinf is None or ninf is None:
            return n_bad, 0, 0
        p = int(np.count_nonzero(block == pinf))
        n = int(np.count_nonzero(block == ninf))
        return n_bad - p - n, p, n
    return (
        int(np.count_nonzero(np.isnan(block))),
        int(np.count_nonzero(np.isposinf(block))),
        int(np.count_nonzero(np.isneginf(block))),
    )


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


def stable_blocks(record: TensorRecord, arr: Array, max_elems: int) -> Iterator[tuple[int, Array]]:
    """:func:`blocks` of a tensor, read so that a file truncated meanwhile is an error, never a SIGBUS
    (:mod:`trainprobe.checkpoint.stable_read`)."""
    from trainprobe.checkpoint.stable_read import read_blocks

    return read_blocks(record, arr, max_elems, blocks)


def count_nonfinite(
    record: TensorRecord, chunk_bytes: int = CHUNK_BYTES, *, fingerprint: bool = False
) -> NonFinite:
    """Exact NaN/+Inf/−Inf counts and the first bad index of a floating tensor (zeros for other dtypes).

    Counts are per element, as ``torch.isnan(t).sum()`` counts them. An axis of stride 0 (``expand``)
    repeats the same stored values: it is read once and its counts multiplied (a 1.5 kB tensor of 10^15
    elements takes microseconds; a NaN in it counts 10^15 times and its first bad index is the first place
    it shows). ``fingerprint``: also the tensor's fingerprint (:mod:`trainprobe.checkpoint.fingerprint`), from
    the container's stored CRC32 when it has one, else computed on the blocks this pass reads anyway (for an
    expanded tensor: its stored values, and its shape)."""
    stored = stored_fingerprint(record) if fingerprint else None
    hasher = Fingerprinter() if fingerprint and stored is None else None
    view, repeats = record.collapsed()
    found = _count_stored(view, chunk_bytes, hasher) if record.numel else NonFinite()
    digest = stored
    if hasher is not None:
        digest = hasher.digest() if repeats == 1 else f"{hasher.digest()}:expanded{list(record.shape)}"
    return NonFinite(
        found.nan * repeats, found.posinf * repeats, found.neginf * repeats, found.first_bad_index, digest
    )


def _count_stored(record: TensorRecord, chunk_bytes: int, hasher: Fingerprinter | None) -> NonFinite:
    info = record.dtype_info
    if info is None or not info.is_floating:
        if hasher is not None:
            arr = record.array()
            release = block_releaser(record, arr)
            for start, block in stable_blocks(record, arr, max(1, chunk_bytes // max(1, arr.dtype.itemsize))):
                hasher.update(block)
                release(start, block.size)
        return NonFinite()
    arr = record.array()
    dtype = record.dtype
    if info.kind == "complex":
        return _count_complex(arr, dtype, chunk_bytes, hasher)
    max_elems = max(1, min(chunk_bytes // arr.dtype.itemsize, CHUNK_ELEMS))
    nan = pinf = ninf = 0
    first: int | None = None
    release = block_releaser(record, arr)
    for start, block in stable_blocks(record, arr, max_elems):
        finite = all_finite(dtype, block)
        if hasher is not None:
            hasher.update(block)
        release(start, block.size)
        if finite:
            continue
        a, b, c = classify(dtype, block)
        nan, pinf, ninf = nan + a, pinf + b, ninf + c
        if first is None:
            first = start + int(np.flatnonzero(bad_mask(dtype, block))[0])
    index = tuple(int(i) for i in np.unravel_index(first, record.shape)) if first is not None else None
    return NonFinite(nan, pinf, ninf, index)


def _count_complex(arr: Array, dtype: str, chunk_bytes: int, hasher: Fingerprinter | None) -> NonFinite:
    real, imag = _complex_parts(arr, dtype)
    max_elems = max(1, min(chunk_bytes // (2 * real.dtype.itemsize), CHUNK_ELEMS))
    nan = pinf = ninf = 0
    first: int | None = None
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
    index = tuple(int(i) for i in np.unravel_index(first, real.shape)) if first is not None else None
    return NonFinite(nan, pinf, ninf, index)


def _f8_table(exp_bits: int, man_bits: int, bias: int, kind: str) -> Array:
    """float32 values of all 256 bit patterns of a float8 format (NaN where the format has NaN/Inf
    patterns)."""
    codes = np.arange(256, dtype=np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> man_bits) & ((1 << exp_bits) - 1)
    man = codes & ((1 << man_bits) - 1)
    normal = (1 + man / (1 << man_bits)) * np.exp2(exp - bias)
    sub = (man / (1 << man_bits)) * np.exp2(1 - bias)
    values = sign * np.where(exp == 0, sub, normal)
    if kind == "fn":
        values[(codes & 0x7F) == 0x7F] = np.nan
    elif kind == "ieee":
        values[exp == (1 << exp_bits) - 1] = np.nan
    elif kind == "fnuz":
        values[codes == 0x80] = np.nan
    table: Array = values.astype(np.float32)
    return table


_F8_TABLES: dict[str, Array] = {}


def _f8_lookup(dtype: str) -> Array:
    if dtype not in _F8_TABLES:
        if dtype == "float8_e4m3fn":
            table = _f8_table(4, 3, 7, "fn")
        elif dtype == "float8_e5m2":
            table = _f8_table(5, 2, 15, "ieee")
        elif dtype == "float8_e4m3fnuz":
            table = _f8_table(4, 3, 8, "fnuz")
        elif dtype == "float8_e5m2fnuz":
            table = _f8_table(5, 2, 16, "fnuz")
        else:  # float8_e8m0fnu: 2**(code-127), 0xFF NaN
            table = np.exp2(np.arange(256, dtype=np.float64) - 127).astype(np.float32)
            table[255] = np.nan
        _F8_TABLES[dtype] = table
    return _F8_TABLES[dtype]


def as_float(dtype: str, block: Array) -> Array:
    """Decode a block to float64 values (bfloat16/float8 from their bits; complex as magnitudes)."""
    if dtype == "bfloat16":
        out: Array = (block.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return out
    if dtype.startswith("float8"):
        return _f8_lookup(dtype)[block].astype(np.float64)
    if np.iscomplexobj(block):
        return np.abs(block).astype(np.float64)
    return block.astype(np.float64)


def compute_stats(record: TensorRecord, chunk_elems: int = 1 << 20) -> Stats | None:
    """min, max, mean, std, absmax, L2 norm and zero fraction over the finite elements (complex:
    magnitudes)."""
    info = record.dtype_info
    if info is None or info.kind == "opaque" or record.numel == 0:
        return None
    # An expanded tensor's repeated values weigh as often as they show: mean, std and extremes are those
    # of its stored values, the L2 norm grows with the square root of the repeats.
    record, repeats = record.collapsed()
    arr = record.array()
    if record.dtype == "complex32":
        arr = arr.astype(np.float32).view(np.complex64)[..., 0]
    count = zeros = 0
    total = sq = 0.0
    lo, hi, amax = math.inf, -math.inf, 0.0
    for _start, block in blocks(arr, chunk_elems):
        values = as_float(record.dtype, block).ravel()
        values = values[np.isfinite(values)]
        if values.size == 0:
            continue
        count += values.size
        zeros += int(np.count_nonzero(values == 0))
        total += float(values.sum())
        sq += float(np.dot(values, values))
        lo = min(lo, float(values.min()))
        hi = max(hi, float(values.max()))
        amax = max(amax, float(np.abs(values).max()))
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
