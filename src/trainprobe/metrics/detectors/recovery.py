"""How a spike ended: the level a jump settled at when it came most of the way back, and a change in words."""

from __future__ import annotations

import numpy as np

from trainprobe.metrics.findings import fmt_value

SETTLE_ROWS = 5


def settled_after(
    x: np.ndarray, steps: np.ndarray, start: int, peak: int, base: float, window: int
) -> tuple[float | None, float | None]:
    """(steps to settle, the level settled at) for a spike that did not come back within tolerance but
    came most of the way: the median of five rows in a row within a quarter of the peak's distance from the
    baseline (a save that upset training, after which the loss stays a little higher). (None, None) if not."""
    rest = x[peak + 1 : peak + 1 + 4 * window]
    if rest.size < SETTLE_ROWS:
        return None, None
    excess = np.abs(rest - base)
    excess[~np.isfinite(excess)] = np.inf  # a NaN is no recovery
    med = np.median(np.lib.stride_tricks.sliding_window_view(excess, SETTLE_ROWS), axis=1)
    ok = np.flatnonzero(med <= 0.25 * abs(float(x[peak]) - base))
    if not ok.size:
        return None, None
    at = peak + 1 + int(ok[0])
    limit = 0.25 * abs(float(x[peak]) - base)
    first = at + int(np.argmax(excess[at - peak - 1 : at - peak - 1 + SETTLE_ROWS] <= limit))
    return float(steps[first] - steps[start]), float(np.median(x[at : at + SETTLE_ROWS]))


def change_text(before: float, after: float) -> str:
    """``-97%``, ``+60%``, or a ratio once it is past doubling (``×9.4e+12``, not ``+937773251534779%``)."""
    if before and after / before >= 2:
        return f"×{fmt_value(after / before)}"
    return f"{(after - before) / abs(before) if before else 0.0:+.0%}"


__all__ = ["SETTLE_ROWS", "change_text", "settled_after"]
