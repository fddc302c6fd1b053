"""Trends over many rows: divergence and an explosion in the first steps.

**Divergence** (a loss that climbs and keeps climbing; an accuracy that falls and stays down), within one
stretch of steps (a resume starts a new one), in any of these shapes:

- *explosion or sustained climb*: the loss reaches 10× its lowest level so far (the lowest of a 3-row running
  median, so one perfectly fitted batch is no "lowest level") and the median of the rows from there (ten, or
  a tenth of what is left) stays above 5× it, it is not back under 3× within a fifth of the rows that
  follow, and, if it does come back, its second half is not lower than its first (a jump that decays back is
  a spike); nor is it a jump whose second half settles under 60 % of its first three rows and under 3× the
  median of the 20 rows before it (a save that upset training, then mostly recovered: a spike). The onset is
  that row, the end where it is back under 3×. This is also a climb after a spike that had recovered;
- *a rising tail* (long logs): the medians of the last four of twenty blocks keep rising, to ≥ 1.5× the best;
- *a short climb* (a few pasted lines): four or more rises in a row, to ≥ 1.5× where they began;
- *a climb the gradients confirm*: the loss rises on two rows in a row after its lowest point while a gradient
  norm grows ≥ 3× over the same rows (or the fp16 loss scale is cut twice);
- for an eval accuracy: it falls below 95 % of its best, never comes back to it, and sinks to 90 % or lower.

**Overfitting** lives in :mod:`.overfitting`.

**Early explosion**: in the first ten rows the loss grows ≥ 10× its first value, or ≥ 3× while a gradient norm
grows ≥ 10×.

Losses that take both signs (RL, GAN objectives) are left alone: their ratios mean nothing.
"""

from __future__ import annotations

import re

import numpy as np

from trainprobe.conventions import step_text
from trainprobe.metrics.detectors.families import trend_kind
from trainprobe.metrics.detectors.spikes import stretches
from trainprobe.metrics.findings import DIVERGENCE, EARLY_EXPLOSION, Finding, fmt_value
from trainprobe.metrics.splits import EVAL, TRAIN, split_of
from trainprobe.metrics.table import RunLog

# the rows just before a climb whose median and spread are its reference, and the fewest that tell a noise
NOISE_WINDOW = 20
NOISE_ROWS = 5
_GRAD = re.compile(r"(?i)grad.?norm|gnorm|total_grad_norm|grad_norm")
_SCALE = re.compile(r"(?i)loss.?scale")


def _series(run: RunLog, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, steps, values) where ``metric`` is logged and finite."""
    col = run.columns[metric]
    rows = np.flatnonzero(run.mask(metric) & np.isfinite(col))
    return rows, run.steps[rows], col[rows]


def _running_median3(x: np.ndarray) -> np.ndarray:
    if x.size < 3:
        return np.array(x, dtype=np.float64)
    padded = np.concatenate([[x[0]], x, [x[-1]]])
    return np.asarray(
        np.median(np.lib.stride_tricks.sliding_window_view(padded, 3), axis=1), dtype=np.float64
    )


def _finding(
    run: RunLog,
    metric: str,
    rows: np.ndarray,
    steps: np.ndarray,
    onset: int,
    end: int,
    low: float,
    high: float,
    text: str,
) -> Finding:
    return Finding(
        DIVERGENCE,
        "error",
        run.name,
        metric,
        float(steps[onset]),
        float(steps[end]),
        value=high,
        baseline=low,
        magnitude=high / low if low else float("inf"),
        row=int(rows[onset]),
        message=f"{metric} is diverging from step {step_text(steps[onset])}: {text}",
    )


def _grad_columns(run: RunLog) -> list[str]:
    return [c for c in run.columns if _GRAD.search(c)]


def _grows(run: RunLog, name: str, step_from: float, step_to: float, factor: float) -> bool:
    """Whether ``name`` grew ``factor``× between the two steps: its median over them against its median just
    before, once there are rows enough for medians (a noisy gradient norm's largest value is no growth),
    else its largest value against the last one before."""
    _rows, steps, values = _series(run, name)
    before = values[steps <= step_from]
    during = values[(steps > step_from) & (steps <= step_to)]
    if not before.size or not during.size or before[-1] <= 0:
        return False
    if before.size >= NOISE_ROWS and during.size >= NOISE_ROWS:
        return bool(np.median(during) >= factor * np.median(before[-NOISE_WINDOW:]))
    return bool(during.max() >= factor * before[-1])


def beyond_noise(x: np.ndarray, onset: int, end: int, *, k: float = 3.0) -> bool:
    """Whether the level of rows ``onset..end`` (their median) moved beyond the noise of the rows just
    before (their median plus ``k`` robust standard deviations, and 10 % above it): a climb, not a noisy
    stretch whose median stayed where it was. A climb from the first rows takes its noise from the rows after
    it, around their trend (second differences: a steady climb has none); too few rows to know the noise:
    the shape decides."""
    before = x[max(0, onset - NOISE_WINDOW) : onset]
    after = x[onset : end + 1]
    if not before.size or after.size < 3:
        return True
    ref = float(np.median(before))
    level = float(np.median(after))
    if before.size >= NOISE_ROWS:
        noise = 1.4826 * float(np.median(np.abs(before - ref)))
    elif after.size >= NOISE_ROWS:
        noise = 1.4826 * float(np.median(np.abs(np.diff(after, 2)))) / np.sqrt(6.0)
    else:
        return True
    return level > ref + k * noise and level > 1.1 * ref


def _halvings(run: RunLog, step_from: float, step_to: float) -> int:
    for name in run.columns:
        if _SCALE.search(name):
            _rows, steps, values = _series(run, name)
            part = values[(steps >= step_from) & (steps <= step_to)]
            return int(np.count_nonzero(np.diff(part) < 0))
    return 0


def _explosion_or_climb(
    run: RunLog, metric: str, rows: np.ndarray, steps: np.ndarray, x: np.ndarray, start_level: float
) -> Finding | None:
    """10× the lowest level so far and staying up (the module docstring's first shape)."""
    n = x.size
    smooth = _running_median3(x)
    low = np.minimum.accumulate(smooth)
    # ten rows to tell it from a spike that decays, and above a tenth of where the loss started (0.01 → 0.1
    # near the floor is noise)
    m = max(n - 10, 0)  # rows with ten rows from them on
    jumps = np.flatnonzero((x[1 : 1 + m] >= 10 * low[:m]) & (low[:m] > 0)) + 1
    candidates = jumps[:1000].tolist()
    onset_of: dict[int, int] = {}
    for i in candidates:  # the first row of each run of rows in a row that are up (the jump's onset)
        onset_of[i] = onset_of.get(i - 1, i)
    for i in candidates:
        base = low[i - 1]
        span = max(10, (n - i) // 10)  # a tenth of what is left: a spike that decays is no climb
        level = float(np.median(x[i : i + span]))
        if level < 5 * base or level < 0.1 * start_level:
            continue
        back = np.flatnonzero(smooth[i:] < 3 * base)
        end = i + int(back[0]) - 1 if back.size else n - 1
        if back.size and end - i + 1 < 0.2 * (n - i):
            continue  # up and back down within a fifth of what follows: a spike, not a climb
        if _decays_back(x, x[i : end + 1], onset_of[i], came_back=bool(back.size)):
            continue
        peak = float(x[i : end + 1].max())
        text = f"{fmt_value(float(base))} → {fmt_value(float(x[i]))} and up to {fmt_value(peak)}" + (
            " by the end of the log"
            if not back.size
            else f", back under {fmt_value(3 * float(base))} at step {step_text(steps[end + 1])}"
        )
        return _finding(run, metric, rows, steps, i, max(end, i), float(base), peak, text)
    return None


def _decays_back(x: np.ndarray, rise: np.ndarray, onset: int, *, came_back: bool) -> bool:
    """A jump that is a spike after all: it came back and its second half is lower than its first (a save
    that upset training), or it fell most of the way back and stays near where it was."""
    half = max(1, rise.size // 2)
    if came_back and rise.size >= 4 and np.median(rise[half:]) < np.median(rise[:half]):
        return True
    if rise.size >= 6:
        jump, settled = float(np.median(x[onset : onset + 3])), float(np.median(rise[half:]))
        before = float(np.median(x[max(0, onset - 20) : onset]))
        if settled < 0.6 * jump and settled < 3 * before:
            return True
    return False


def _rising_tail(
    run: RunLog, metric: str, rows: np.ndarray, steps: np.ndarray, x: np.ndarray, start_level: float
) -> Finding | None:
    """A long log whose last four of twenty block medians keep rising, to ≥ 1.5× the best."""
    n, blocks = x.size, 20
    if n < blocks * 5:
        return None
    size = n // blocks
    meds = np.median(x[: size * blocks].reshape(blocks, size), axis=1)
    best = int(np.argmin(meds))
    tail = meds[best:]
    if tail.size < 4 or not np.all(np.diff(tail[-4:]) > 0) or tail[-1] < 1.5 * meds[best]:
        return None
    low, high = float(meds[best]), float(tail[-1])
    text = f"it rose from {fmt_value(low)} to {fmt_value(high)} at the end and keeps rising"
    return _finding(run, metric, rows, steps, best * size + size // 2, n - 1, low, high, text)


def _short_climb(
    run: RunLog, metric: str, rows: np.ndarray, steps: np.ndarray, x: np.ndarray, start_level: float
) -> Finding | None:
    """A few pasted lines: four or more rises in a row, to ≥ 1.5× where they began."""
    if x.size >= 50:
        return None
    ups = np.diff(x) > 0
    run_len = 0
    for i, up in enumerate(ups):
        run_len = run_len + 1 if up else 0
        first = i + 1 - run_len
        if run_len >= 4 and x[i + 1] >= 1.5 * x[first]:
            low, high = float(x[first]), float(x[i + 1])
            text = f"it rose on {run_len} rows in a row, {fmt_value(low)} → {fmt_value(high)}"
            return _finding(run, metric, rows, steps, first + 1, i + 1, low, high, text)
    return None


def _climb_with_gradients(
    run: RunLog, metric: str, rows: np.ndarray, steps: np.ndarray, x: np.ndarray, start_level: float
) -> Finding | None:
    """Two rises in a row after the lowest point while a gradient norm grows ≥ 3× (or the loss scale is cut
    twice) over the same steps."""
    n, best = x.size, int(np.argmin(x))
    if not (best + 2 < n and x[best + 1] > 1.02 * x[best] and x[best + 2] > 1.02 * x[best + 1]):
        return None
    step_from, step_to = float(steps[best]), float(steps[-1])
    grads = [g for g in _grad_columns(run) if _grows(run, g, step_from, step_to, 3.0)]
    halved = _halvings(run, step_from, step_to)
    if not grads and halved < 2:
        return None
    why = f"{grads[0]} grew ≥3× over the same steps" if grads else f"the loss scale was cut {halved} times"
    text = f"it rose from {fmt_value(float(x[best]))} to {fmt_value(float(x[-1]))} while {why}"
    return _finding(run, metric, rows, steps, best + 1, n - 1, float(x[best]), float(x[best:].max()), text)


#: the shapes of a diverging loss, in the module docstring's order: the first that fits is the finding
_LOSS_SHAPES = (_explosion_or_climb, _rising_tail, _short_climb, _climb_with_gradients)


def _loss_divergence(
    run: RunLog, metric: str, rows: np.ndarray, steps: np.ndarray, x: np.ndarray, start_level: float
) -> Finding | None:
    for shape in _LOSS_SHAPES:
        found = shape(run, metric, rows, steps, x, start_level)
        if found is None:
            continue
        onset = int(np.searchsorted(steps, found.step))
        end = int(np.searchsorted(steps, found.end_step, side="right")) - 1
        if beyond_noise(x, onset, end):
            return found
    return None


def _accuracy_divergence(
    run: RunLog, metric: str, rows: np.ndarray, steps: np.ndarray, x: np.ndarray
) -> Finding | None:
    if x.size < 4:
        return None
    best = int(np.argmax(x))
    after = x[best + 1 :]
    if after.size < 3 or x[best] <= 0 or after.max() >= 0.95 * x[best] or after.min() > 0.9 * x[best]:
        return None
    if best > 0 and x[best - 1] < 0.5 * x[best]:
        return None  # a best reached in one row from far below is an outlier (0, 100, 0, 0 %): no level lost
    low = float(after.min())
    text = (f"{metric} fell from its best {fmt_value(float(x[best]))} (step {step_text(steps[best])}) to "
            f"{fmt_value(low)} and has not come back")  # fmt: skip
    return _since_best(DIVERGENCE, run, metric, rows, steps, best, low, float(x[best]), text)


def _since_best(
    kind: str,
    run: RunLog,
    metric: str,
    rows: np.ndarray,
    steps: np.ndarray,
    best: int,
    value: float,
    baseline: float,
    message: str,
) -> Finding:
    """A warning from the row after the best one (``best``) to the end: ``value`` against the best."""
    return Finding(
        kind,
        "warning",
        run.name,
        metric,
        float(steps[best + 1]),
        float(steps[-1]),
        value=value,
        baseline=baseline,
        magnitude=value / baseline,
        row=int(rows[best + 1]),
        message=message,
    )


def detect_divergence(run: RunLog, metric: str) -> list[Finding]:
    kind = trend_kind(metric)
    if kind not in ("loss", "accuracy") or (kind == "accuracy" and split_of(metric) != EVAL):
        return []  # a training accuracy (detectron2's fg_cls_accuracy) swings too much early on
    rows, steps, x = _series(run, metric)
    if x.size < 3 or x.min() < 0:
        return []
    start_level = float(np.median(x[: min(10, x.size)]))
    for part in stretches(steps):
        r, s, v = rows[part], steps[part], x[part]
        got = (
            _loss_divergence(run, metric, r, s, v, start_level)
            if kind == "loss"
            else _accuracy_divergence(run, metric, r, s, v)
        )
        if got is not None:
            return [got]
    return []


def detect_early_explosion(run: RunLog, metric: str, *, first_rows: int = 10) -> list[Finding]:
    if trend_kind(metric) != "loss" or split_of(metric) != TRAIN:
        return []
    rows, steps, x = _series(run, metric)
    head = x[:first_rows]
    if head.size < 3 or head[0] <= 0 or head.min() < 0:
        return []
    peak = int(np.argmax(head))
    ratio = float(head[peak] / head[0])
    grads = [g for g in _grad_columns(run) if _grows(run, g, float(steps[0]), float(steps[peak]), 10.0)]
    if not (ratio >= 10 or (ratio >= 3 and grads)):
        return []
    why = f" while {grads[0]} grew ≥10×" if grads else ""
    return [
        Finding(
            EARLY_EXPLOSION,
            "error",
            run.name,
            metric,
            float(steps[0]),
            float(steps[peak]),
            value=float(head[peak]),
            baseline=float(head[0]),
            magnitude=ratio,
            row=int(rows[0]),
            message=(
                f"{metric} exploded in the first steps: {fmt_value(float(head[0]))} at step "
                f"{step_text(steps[0])} → {fmt_value(float(head[peak]))} at step {step_text(steps[peak])}"
                f" (×{ratio:.3g}){why}"
            ),
        )
    ]


__all__ = ["detect_divergence", "detect_early_explosion"]
