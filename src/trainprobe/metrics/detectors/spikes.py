"""Spikes and cliffs: a value that jumps away from its recent level and comes back, or jumps and stays.

A spike is a modified z-score ``0.6745·(x − median)/MAD`` over the trailing window above the threshold, with
a relative guard (the jump is more than a quarter of the level for losses and accuracies, a doubling for
other series), direction-aware (a loss up, an accuracy down). Rules that keep the verdicts honest:

- **stretches**: a resume (the step goes back) starts a new stretch with its own baseline, so a log of
  pasted snippets or restarted runs is judged snippet by snippet;
- **a baseline first**: the z-score needs ten earlier values in the stretch; a stretch shorter than that
  (a few pasted lines) uses the short rule instead: a loss that jumps ×1.5 from one row to the next;
- **recovery against the baseline that declared the spike**: a spike has recovered once the series is back
  within tolerance of that baseline, or beyond it in the good direction (a loss that falls below where it
  was before the spike has recovered, however fast it was falling);
- **suspect rows**: right after a checkpoint save or a resume a jump is suspect by itself, so the threshold
  there is halved (every jump after a save on the demo run is reported);
- a series that takes both signs (RL and GAN objectives) has no meaningful ratios: no spikes or cliffs;
- severity ``info`` for an eval value off and back (small eval sets are noisy), and for a loss blip whose
  peak stays under a tenth of where the loss started (batch noise near the floor).

A jump that does not come back, with the level over the next window and the one after ≥ 50 % away from the
level before, is a cliff.
"""

from __future__ import annotations

import itertools

import numpy as np

from trainprobe.metrics.findings import CLIFF, SPIKE, Finding, fmt_step, fmt_value
from trainprobe.metrics.roles import metric_kind
from trainprobe.metrics.rolling import trailing_mad, trailing_median
from trainprobe.metrics.splits import EVAL, split_of
from trainprobe.metrics.table import RunLog

MIN_BASELINE = 10
SUSPECT_ROWS = 3


def stretches(steps: np.ndarray) -> list[slice]:
    """Runs of rows whose step never goes back."""
    cuts = np.flatnonzero(np.diff(steps) < 0) + 1
    bounds = [0, *cuts.tolist(), steps.size]
    return [slice(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def _rel_change(before: float, after: float) -> float:
    if before == 0:
        return 0.0 if after == 0 else float(np.sign(after))
    return (after - before) / abs(before)


def detect_spikes(
    run: RunLog,
    metric: str,
    *,
    threshold: float = 6.0,
    window: int = 50,
    rel_guard: float = 0.25,
    suspect: np.ndarray | None = None,
) -> list[Finding]:
    """Spikes and cliffs of one metric; ``suspect`` marks rows (of the run) right after a save or resume."""
    kind = metric_kind(metric)
    if kind in ("lr", "time", "counter"):
        return []
    col = run.columns[metric]
    rows = np.flatnonzero(run.mask(metric) & np.isfinite(col))
    if rows.size < 2:
        return []
    x = col[rows]
    if x.min() < 0:
        return []  # a loss that takes both signs (RL, GAN objectives): its jumps and ratios mean nothing
    steps = run.steps[rows]
    findings: list[Finding] = []
    sus = suspect[rows] if suspect is not None else np.zeros(rows.size, dtype=bool)
    for part in stretches(steps):
        findings.extend(
            _spikes_in(
                run, metric, kind, rows[part], x[part], steps[part], sus[part], threshold, window, rel_guard
            )
        )
    start_level = float(np.median(x[: min(10, x.size)]))
    for f in findings:
        if f.kind != SPIKE or f.severity == "info":
            continue
        if split_of(metric) == EVAL and (f.magnitude or 0) < 10 and f.recovered_after is not None:
            f.severity = "info"  # one evaluation off and back: small eval sets are noisy
        elif kind == "loss" and (f.value or 0) < 0.1 * start_level:
            f.severity = "info"  # a blip near the floor (0.015 → 0.15 after 2.3 at the start) is batch noise
    return findings


def _spikes_in(
    run: RunLog,
    metric: str,
    kind: str,
    rows: np.ndarray,
    x: np.ndarray,
    steps: np.ndarray,
    suspect: np.ndarray,
    threshold: float,
    window: int,
    rel_guard: float,
) -> list[Finding]:
    n = x.size
    direction = {"loss": 1, "accuracy": -1}.get(kind, 0)
    prev = np.concatenate([[np.nan], x[:-1]])
    if n < MIN_BASELINE:
        if kind != "loss" or n < 2:
            return []
        # A few pasted lines have no baseline: a loss that jumps ×1.5 from one row to the next is a spike.
        with np.errstate(invalid="ignore"):
            hit = (prev > 0) & (x >= 1.5 * prev)
        med = prev
        scale = np.full(n, np.nan)
    else:
        med = trailing_median(x, window)
        mad = trailing_mad(x, med, window)
        scale = np.maximum(mad, 1e-3 * np.abs(med)) / 0.6745
        with np.errstate(invalid="ignore", divide="ignore"):
            z = (x - med) / scale
            rel = np.abs(x - med) / np.maximum(np.abs(med), 1e-12)
        zz = z * direction if direction else np.abs(z)
        # Gradient norms and other auxiliary series are spiky by nature: only doublings are worth a line.
        guard = rel_guard if kind in ("loss", "accuracy") else max(rel_guard, 1.0)
        limit = np.where(suspect, threshold / 2, threshold)
        enough = np.arange(n) >= MIN_BASELINE
        # a zero baseline (values printed to 4 decimals, 0.0000) has no ratio to judge a jump by
        hit = (zz > limit) & (rel > guard) & np.isfinite(med) & enough & (np.abs(med) > 0)
    flagged = np.flatnonzero(hit)
    if flagged.size == 0:
        return []
    dev = x - med
    findings: list[Finding] = []
    for group in np.split(flagged, np.flatnonzero(np.diff(flagged) > 2) + 1):
        finding = _judge(
            run, metric, kind, rows, x, steps, med, scale, dev, group, threshold, window, rel_guard
        )
        if finding is not None:
            findings.append(finding)
    return findings


def _judge(
    run: RunLog,
    metric: str,
    kind: str,
    rows: np.ndarray,
    x: np.ndarray,
    steps: np.ndarray,
    med: np.ndarray,
    scale: np.ndarray,
    dev: np.ndarray,
    group: np.ndarray,
    threshold: float,
    window: int,
    rel_guard: float,
) -> Finding | None:
    start = int(group[0])
    peak = int(group[np.argmax(np.abs(dev[group]))])
    base = float(med[start])
    spread = float(scale[start]) if np.isfinite(scale[start]) else 0.0
    level_before = float(np.median(x[max(0, start - window) : start]))
    after = x[start : start + window]
    later = x[start + window : start + 2 * window]
    shift_after = _rel_change(level_before, float(np.median(after))) if after.size >= 5 else 0.0
    shift_later = _rel_change(level_before, float(np.median(later))) if later.size >= 5 else shift_after
    tol = max(threshold / 2 * spread, rel_guard * abs(base))
    rest_values = x[peak + 1 :]
    if kind == "loss":
        back = rest_values <= base + tol
    elif kind == "accuracy":
        back = rest_values >= base - tol
    else:
        back = np.abs(rest_values - base) <= tol
    rest = np.flatnonzero(back)
    recovered = float(steps[peak + 1 + int(rest[0])] - steps[start]) if rest.size else None
    is_shift = (
        abs(shift_after) >= 0.5 and abs(shift_later) >= 0.5 and np.sign(shift_after) == np.sign(shift_later)
    )
    if is_shift and recovered is None and after.size >= min(window, 10):
        new_level = float(np.median(later if later.size >= 5 else after))
        return Finding(
            CLIFF,
            "error" if kind in ("loss", "accuracy") else "warning",
            run.name,
            metric,
            float(steps[start]),
            float(steps[min(start + window, len(steps) - 1)]),
            value=new_level,
            baseline=level_before,
            magnitude=shift_later,
            row=int(rows[start]),
            message=(
                f"{metric} fell off a cliff at step {fmt_step(steps[start])}: "
                f"{fmt_value(level_before)} → {fmt_value(new_level)} ({shift_later:+.0%}) and stayed there"
            ),
        )
    ratio = float(x[peak] / base) if base else float("inf")
    size = abs(float(dev[peak])) / max(abs(base), 1e-12)
    if kind in ("loss", "accuracy"):
        if size >= 2.0 or recovered is None:
            severity = "error"
        elif len(group) > 3 or size >= 0.5:
            severity = "warning"
        else:
            severity = "info"
    else:
        severity = "info"
    if recovered is None and peak == len(x) - 1:
        rec_text = "at the last row of the log"
    elif recovered is None:
        rec_text = "has not recovered by the end of the log"
    else:
        rec_text = f"recovered after {fmt_step(recovered)} step{'' if recovered == 1 else 's'}"
    return Finding(
        SPIKE,
        severity,
        run.name,
        metric,
        float(steps[start]),
        float(steps[int(group[-1])]),
        value=float(x[peak]),
        baseline=base,
        magnitude=ratio,
        recovered_after=recovered,
        row=int(rows[start]),
        message=(
            f"{metric} spiked at step {fmt_step(steps[start])}: {fmt_value(base)} → "
            f"{fmt_value(float(x[peak]))} (×{ratio:.3g}), {rec_text}"
        ),
    )


__all__ = ["MIN_BASELINE", "SUSPECT_ROWS", "detect_spikes", "stretches"]
