"""Trailing rolling statistics without a Python loop per row.

An exact trailing median of window ``w`` costs O(n·w); beyond 5 M window elements (100,000 rows at the
default window of 50) we take medians of fixed blocks of ``b`` rows first (one partition over a reshaped
array) and the trailing median of the last ``w/b`` block medians. The baseline then lags by at most one
block, which is harmless for spike and level-shift detection.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

_EXACT_LIMIT = 20_000_000  # n·w elements per exact pass, in chunks
_ONE_MATRIX = 1 << 16  # n·w up to this: every row's window in one sorted matrix (small logs)
_CACHED_CELLS = 1 << 13  # n·w up to this: the matrix's layout kept for the next series of that length


def trailing_median(x: np.ndarray, window: int, *, exact_limit: int = _EXACT_LIMIT // 4) -> np.ndarray:
    """Median of ``x[i-window:i]`` (strictly before ``i``) for each ``i``; NaN where fewer than 3 values."""
    n = x.shape[0]
    out = np.full(n, np.nan)
    if n < 4:
        return out
    w = max(3, min(window, n - 1))
    if n * w <= exact_limit or w < 8:
        return _exact_trailing(x, w)
    block = max(2, w // 8)
    return _blocked_trailing(x, w, block)


def _exact_trailing(x: np.ndarray, w: int) -> np.ndarray:
    n = x.shape[0]
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)  # np.median takes the mean of integer middles in float64 too
    if n * w <= _ONE_MATRIX:
        return _window_medians(x, w)
    out = np.full(n, np.nan)
    # Warm-up: expanding median over the first rows so early spikes are judged too.
    if w * w <= _ONE_MATRIX:
        out[:w] = _window_medians(x[:w], w)
    else:
        for i in range(3, w):
            out[i] = np.median(x[:i])
    view = sliding_window_view(x, w)  # view[k] = x[k:k+w] -> baseline for row k+w
    step = max(1, _EXACT_LIMIT // w)
    for start in range(0, n - w, step):
        stop = min(n - w, start + step)
        out[start + w : stop + w] = np.median(view[start:stop], axis=1)
    return out


def _window_medians(x: np.ndarray, w: int) -> np.ndarray:
    """The median of the up to ``w`` values before each row of ``x`` (NaN before row 3), from one sort of
    a matrix of every row's window: one ``np.median`` per row was most of the time of a directory of small
    logs.

    A window shorter than ``w`` (the first rows) is padded with ``+inf``, which sorts after every number and
    before NaN; the middle values of the sorted row are those ``np.median`` partitions to, and their mean is
    taken as it takes it (the two middles added, then halved, in the series' type), so the numbers are the
    same. NaN sorts last: a row whose last cell is NaN had one in its window, and is NaN as in
    ``np.median``. (A zero's sign in a window of signed zeros may differ: callers take differences or
    absolute values.)"""
    n = x.shape[0]
    out = np.full(n, np.nan)
    if n <= 3:
        return out
    cells = _cached_cells(n, w) if n * w <= _CACHED_CELLS else _window_cells(n, w)
    padded = np.empty(n + 1, dtype=x.dtype)
    padded[:n] = x
    padded[n] = np.inf
    windows = np.sort(padded[cells.take], axis=1).ravel()
    medians = windows[cells.low]
    medians[cells.even] += windows[cells.high]
    medians[cells.even] /= 2
    medians[np.isnan(windows[cells.last])] = np.nan
    out[3:] = medians
    return out


@dataclass(frozen=True)
class _Cells:
    """Where each row's window lies in the padded series (``take``, one row per output row from row 3;
    index ``n`` is the ``+inf`` pad), and in the flattened sorted matrix: each row's lower middle, its
    upper middle for rows of even length (``even`` selects them), and its last cell."""

    take: np.ndarray
    low: np.ndarray
    even: np.ndarray
    high: np.ndarray
    last: np.ndarray


def _window_cells(n: int, w: int) -> _Cells:
    ends = np.arange(3, n)
    lengths = np.minimum(ends, w)
    columns = np.arange(w)
    take = (ends - lengths)[:, None] + columns[None, :]
    take[columns[None, :] >= lengths[:, None]] = n
    base = np.arange(ends.size) * w
    even = np.flatnonzero(lengths % 2 == 0)
    high = (base + lengths // 2)[even]
    cells = _Cells(take, base + (lengths - 1) // 2, even, high, base + w - 1)
    for array in (cells.take, cells.low, cells.even, cells.high, cells.last):
        array.flags.writeable = False
    return cells


_cached_cells = functools.lru_cache(maxsize=128)(_window_cells)


def _blocked_trailing(x: np.ndarray, w: int, block: int) -> np.ndarray:
    n = x.shape[0]
    n_blocks = n // block
    meds = np.median(x[: n_blocks * block].reshape(n_blocks, block), axis=1)
    k = max(1, w // block)
    out = np.full(n, np.nan)
    if n_blocks <= k:
        return _exact_trailing(x, w)
    base = np.median(sliding_window_view(meds, k), axis=1)  # base[j] = median(meds[j:j+k]) -> blocks j+k...
    # Row i in block c uses the k blocks before c: base[c-k].
    rows = np.arange(n)
    blk = rows // block
    ok = blk >= k
    idx = np.minimum(blk[ok] - k, base.shape[0] - 1)
    out[ok] = base[idx]
    return out


def trailing_mad(x: np.ndarray, median: np.ndarray, window: int) -> np.ndarray:
    """Trailing median absolute deviation around the trailing median (same windowing as
    ``trailing_median``)."""
    fill = _median_of_numbers(x) if np.isfinite(x).any() else 0.0
    dev = np.abs(x - np.nan_to_num(median, nan=fill))
    return trailing_median(dev, window)


def _median_of_numbers(x: np.ndarray) -> float:
    """``np.nanmedian(x)`` of a 1-D series with a number in it, without its per-call overhead (the
    same partition of the values that are not NaN, the same mean of the middle one or two)."""
    if x.dtype != np.float64:
        return float(np.nanmedian(x))
    values = x[~np.isnan(x)]
    half = values.size // 2
    if values.size % 2:
        return float(np.partition(values, half)[half])
    middle = np.partition(values, [half - 1, half])
    return float((middle[half - 1] + middle[half]) / 2)
