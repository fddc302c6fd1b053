"""Trailing rolling statistics without a Python loop per row.

An exact trailing median of window ``w`` costs O(n·w); beyond 5 M window elements (100,000 rows at the
default window of 50) we take medians of fixed blocks of ``b`` rows first (one partition over a reshaped
array) and the trailing median of the last ``w/b`` block medians. The baseline then lags by at most one
block, which is harmless for spike and level-shift detection.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

_EXACT_LIMIT = 20_000_000  # n·w elements per exact pass, in chunks


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
    out = np.full(n, np.nan)
    # Warm-up: expanding median over the first rows so early spikes are judged too.
    for i in range(3, min(w, n)):
        out[i] = np.median(x[:i])
    if n <= w:
        return out
    view = sliding_window_view(x, w)  # view[k] = x[k:k+w] -> baseline for row k+w
    step = max(1, _EXACT_LIMIT // w)
    for start in range(0, n - w, step):
        stop = min(n - w, start + step)
        out[start + w : stop + w] = np.median(view[start:stop], axis=1)
    return out


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
    dev = np.abs(x - np.nan_to_num(median, nan=np.nanmedian(x) if np.isfinite(x).any() else 0.0))
    return trailing_median(dev, window)
