"""The trailing median gives the numbers of the plain definition — one ``np.median`` of the rows before each
row — on random series with NaN, infinities, ties and signed values, on short series, and with windows
longer than the series (the warm-up rows are computed in one call per parity, not one per row)."""

from __future__ import annotations

import numpy as np
import pytest

from trainprobe.metrics.rolling import trailing_mad, trailing_median


def _reference(x: np.ndarray, window: int) -> np.ndarray:
    """Median of the up to ``max(3, window)`` values before each row; NaN before the third row and for
    series of fewer than 4 values."""
    out = np.full(x.shape[0], np.nan)
    if x.shape[0] < 4:
        return out
    w = max(3, window)
    for i in range(3, x.shape[0]):
        out[i] = np.median(x[max(0, i - w) : i])
    return out


def _series(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    x = rng.normal(0, 1, n)
    if kind == "ties":
        x = np.round(x * 2) / 2
    elif kind == "nonfinite":
        x[rng.random(n) < 0.08] = np.nan
        x[rng.random(n) < 0.05] = np.inf
        x[rng.random(n) < 0.05] = -np.inf
    elif kind == "huge":
        x = x * 1e308  # the mean of two middle values overflows the same way in both
    return x


@pytest.mark.parametrize("kind", ["plain", "ties", "nonfinite", "huge"])
def test_trailing_median_matches_one_median_per_row(kind: str) -> None:
    rng = np.random.default_rng(19)
    for n in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 20, 21, 49, 50, 51, 52, 120, 333, 2000]:
        for window in [1, 3, 4, 5, 8, 19, 20, 50, 51, 1000]:
            with np.errstate(invalid="ignore", over="ignore"):
                x = _series(rng, n, kind)
                got = trailing_median(x, window, exact_limit=10**9)
                want = _reference(x, window)
            np.testing.assert_array_equal(got, want, err_msg=f"n={n} window={window} x={x!r}")


def test_float32_and_integer_series_keep_their_numbers() -> None:
    rng = np.random.default_rng(7)
    series: list[np.ndarray] = [rng.normal(0, 1, 40).astype(np.float32), rng.integers(-5, 5, 40)]
    for x in series:
        for window in [5, 20, 50]:
            np.testing.assert_array_equal(trailing_median(x, window), _reference(x, window))


def test_a_nan_in_the_warm_up_rows_is_nan_until_it_leaves_the_window() -> None:
    x = np.array([1.0, np.nan, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    got = trailing_median(x, 4)
    # rows 3..5 have the NaN (row 1) among their up to 4 values before; row 6 on no longer
    assert np.isnan(got[:6]).all()
    assert got[6:].tolist() == [3.5, 4.5, 5.5, 6.5]


@pytest.mark.parametrize("kind", ["plain", "ties", "nonfinite"])
def test_trailing_mad_matches_the_median_of_deviations(kind: str) -> None:
    rng = np.random.default_rng(3)
    for n in [4, 5, 20, 21, 60, 61, 700]:
        x = _series(rng, n, kind)
        med = trailing_median(x, 50)
        with np.errstate(invalid="ignore"):
            dev = np.abs(x - np.nan_to_num(med, nan=np.nanmedian(x)))
            got = trailing_mad(x, med, 50)
        np.testing.assert_array_equal(got, _reference(dev, 50), err_msg=f"n={n} x={x!r}")
