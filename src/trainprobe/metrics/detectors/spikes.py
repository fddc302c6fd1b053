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
  was before the spike has recovered, however fast it was falling); a loss that comes most of the way back
  (five rows in a row within a quarter of the peak's distance) and stays a little higher has *settled*, and
  the message gives the level it settled at;
- **a spike is no baseline**: once a spike is found, its rows up to its recovery are replaced by the
  baseline that declared it for the judging of the rows after it, so the tail of one spike does not widen
  the window and hide the next (the demo run's saves, fifty steps apart, each upset the loss);
- **suspect rows**: right after a checkpoint save or a resume (three rows) a jump is suspect by itself, so the
  threshold there is two thirds of the usual one (every jump after a save on the demo run is reported; batch
  noise after a healthy save is not); a spike starts at the first row that was half way up to its peak;
- a series that takes both signs (RL and GAN objectives) has no meaningful ratios: no spikes or cliffs;
- severity ``info`` for an eval value off and back (small eval sets are noisy), and for a loss blip whose
  peak stays under a tenth of where the loss started (batch noise near the floor).

A jump that does not come back, with the level over the next window and the one after ≥ 50 % away from the
level before, is a cliff.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from trainprobe.conventions import step_text
from trainprobe.metrics.detectors.families import Family, family_of
from trainprobe.metrics.detectors.noise import SHORT_JUMP, fold_noise, rare_row_jumps
from trainprobe.metrics.detectors.recovery import SETTLE_ROWS, change_text, settled_after
from trainprobe.metrics.findings import CLIFF, SPIKE, Finding, fmt_value
from trainprobe.metrics.rolling import trailing_mad, trailing_median
from trainprobe.metrics.splits import EVAL, split_of
from trainprobe.metrics.table import RunLog

MIN_BASELINE = 10
# the fewest earlier values in its stretch a row is judged against, and the threshold's factor until there
# are MIN_BASELINE of them
MIN_HISTORY = 5
WARMUP_FACTOR = 2.0
# the fewest values of a series any spike is claimed in (six evaluations are no series to call a jump in)
MIN_SERIES = 8
SUSPECT_ROWS = 3
# the threshold on the rows right after a save or resume, as a share of the usual one
SUSPECT_FACTOR = 2 / 3


def stretches(steps: np.ndarray) -> list[slice]:
    """Runs of rows whose step never goes back."""
    cuts = np.flatnonzero(np.diff(steps) < 0) + 1
    bounds = [0, *cuts.tolist(), steps.size]
    return [slice(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def _relchange_text(before: float, after: float) -> float:
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
    family = family_of(metric)
    kind = family.name
    if not family.spikes:
        return []
    col = run.columns[metric]
    rows = np.flatnonzero(run.mask(metric) & np.isfinite(col))
    if rows.size < MIN_SERIES:
        return []
    x = col[rows]
    if x.min() < 0 and not family.signed:
        return []  # a loss that takes both signs (RL, GAN objectives): its jumps and ratios mean nothing
    steps = run.steps[rows]
    findings: list[Finding] = []
    sus = suspect[rows] if suspect is not None else np.zeros(rows.size, dtype=bool)
    parts = stretches(steps)
    short_rule = rare_row_jumps(x, parts)
    for part in parts:
        stretch = _Stretch(
            run, metric, family, rows[part], x[part], steps[part], threshold, window, rel_guard, short_rule
        )
        findings.extend(_spikes_in(stretch, sus[part]))
    start_level = float(np.median(x[: min(10, x.size)]))
    for f in findings:
        if f.kind != SPIKE or f.severity == "info":
            continue
        if split_of(metric) == EVAL and (f.magnitude or 0) < 10 and f.recovered_after is not None:
            f.severity = "info"  # one evaluation off and back: small eval sets are noisy
        elif kind == "loss" and (f.value or 0) < 0.1 * start_level:
            f.severity = "info"  # a blip near the floor (0.015 → 0.15 after 2.3 at the start) is batch noise
    return fold_noise(findings, metric, x, family.direction, suspect)


@dataclass(frozen=True)
class _Stretch:
    """One metric's finite rows within one stretch of steps, and the settings they are judged by."""

    run: RunLog
    metric: str
    family: Family
    rows: np.ndarray
    x: np.ndarray
    steps: np.ndarray
    threshold: float
    window: int
    rel_guard: float
    # whether a short stretch may use the short rule (the series seldom jumps ×1.5 from a row to the next)
    short_rule: bool = True

    @property
    def kind(self) -> str:
        return self.family.name


def _spikes_in(s: _Stretch, suspect: np.ndarray) -> list[Finding]:
    x, steps, kind, threshold, window, rel_guard = s.x, s.steps, s.kind, s.threshold, s.window, s.rel_guard
    n = x.size
    if n < MIN_BASELINE:
        if kind != "loss" or n < 2 or not s.short_rule:
            return []
        # A few pasted lines have no baseline: a loss that jumps ×1.5 from one row to the next is a spike.
        prev = np.concatenate([[np.nan], x[:-1]])
        with np.errstate(invalid="ignore"):
            hit = (prev > 0) & (x >= SHORT_JUMP * prev)
        med, scale = prev, np.full(n, np.nan)
    else:
        med, scale, hit = _baseline(x, x[:0], s.family, suspect, threshold, window, rel_guard, 0, n)
    findings: list[Finding] = []
    excluded = np.zeros(n, dtype=bool)  # rows of spikes found so far: no baseline for the rows after them
    at = 0
    while len(findings) < _MAX_SPIKES:
        flagged = np.flatnonzero(hit[at:]) + at
        if flagged.size == 0:
            break
        gaps = np.flatnonzero(np.diff(flagged) > 2)
        group = flagged[: int(gaps[0]) + 1] if gaps.size else flagged
        group = _with_onset(x, med, group, at)
        dev = x - med
        finding = _judge(s, med, scale, dev, group)
        at = int(group[-1]) + 1
        if finding is None:
            continue
        findings.append(finding)
        if finding.kind != SPIKE or finding.recovered_after is None or n < MIN_BASELINE:
            continue
        start = int(group[0])
        end = int(np.searchsorted(steps, steps[start] + finding.recovered_after, side="left"))
        hit[start : end + 1] = False  # up to the row where it was back: this spike
        if finding.settled_at is not None:
            # it settled at a new level: the rows that stay there are that level, not new spikes
            level = finding.settled_at
            hit[end : end + window] &= np.abs(x[end : end + window] - level) > rel_guard * abs(level)
            continue
        # The rows of a spike that came back are no baseline for the next one: its tail in the window would
        # widen it and hide a jump right after (the demo's saves, fifty steps apart). Its tail counts until
        # the series is close to the baseline again (within the relative guard), if it is within half a
        # window; one that takes longer is a new level, and stays in.
        base = float(med[start])
        tail = x[end : start + window // 2] - base
        sign = s.family.direction
        close = (tail * sign if sign else np.abs(tail)) <= rel_guard * abs(base)
        stop = end + int(np.argmax(close)) if close.any() else end
        excluded[start:stop] = True
        history = x[:start][~excluded[:start]][-window:]
        hi = min(n, stop + window + 1)
        med[stop:hi], scale[stop:hi], hit[stop:hi] = _baseline(
            x, history, s.family, suspect, threshold, window, rel_guard, stop, hi
        )
    return findings


_MAX_SPIKES = 1000


def _with_onset(x: np.ndarray, med: np.ndarray, group: np.ndarray, floor: int) -> np.ndarray:
    """The group with the rows just before it that were already half way up to its peak (a jump whose
    first row stayed under the threshold starts there, not one row later)."""
    first = int(group[0])
    base = med[first]
    if not np.isfinite(base):
        return group
    dev = x[group] - base
    peak = float(dev[np.argmax(np.abs(dev))])
    start = first
    while start - 1 >= max(floor, first - SUSPECT_ROWS) and (x[start - 1] - base) * np.sign(peak) > 0.5 * abs(
        peak
    ):
        start -= 1
    return group if start == first else np.concatenate([np.arange(start, first), group])


def _baseline(
    x: np.ndarray,
    history: np.ndarray,
    family: Family,
    suspect: np.ndarray,
    threshold: float,
    window: int,
    rel_guard: float,
    lo: int,
    hi: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(trailing median, noise scale, spike rows) for rows ``lo:hi``: each judged against the values before
    it, ``history`` (the rows before ``lo`` that count) first."""
    part = np.concatenate([history, x[lo:hi]])
    med = trailing_median(part, window)
    mad = trailing_mad(part, med, window)
    med, mad = med[history.size :], mad[history.size :]
    vals = x[lo:hi]
    level = np.abs(med)
    if family.signed and part.min() < 0:
        # around zero a median is no level: the typical size of the values is
        level = np.maximum(level, trailing_median(np.abs(part), window)[history.size :])
    scale = np.maximum(mad, 1e-3 * level) / 0.6745
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (vals - med) / scale
        rel = np.abs(vals - med) / np.maximum(level, 1e-12)
    zz = z * family.direction if family.direction else np.abs(z)
    limit = np.where(suspect[lo:hi], SUSPECT_FACTOR * threshold, threshold)
    guard = np.full(hi - lo, max(rel_guard, family.rel_guard))
    # Fewer than MIN_BASELINE values before a row: a baseline still warming up, so only a jump twice as
    # far out and at least a doubling counts (×35 on the eighth row of a GAN loss), and none before
    # MIN_HISTORY values.
    earlier = np.arange(lo, hi)
    warming = earlier < MIN_BASELINE
    limit = np.where(warming, WARMUP_FACTOR * limit, limit)
    guard[warming] = np.maximum(guard[warming], 1.0)
    enough = earlier >= MIN_HISTORY
    # a zero baseline (values printed to 4 decimals, 0.0000) has no ratio to judge a jump by
    hit = (zz > limit) & (rel > guard) & np.isfinite(med) & enough & (level > 0)
    return med, scale, hit


def _judge(
    s: _Stretch, med: np.ndarray, scale: np.ndarray, dev: np.ndarray, group: np.ndarray
) -> Finding | None:
    """The spike or cliff of one group of flagged rows, or None."""
    start = int(group[0])
    peak = int(group[np.argmax(np.abs(dev[group]))])
    base = float(med[start])
    spread = float(scale[start]) if np.isfinite(scale[start]) else 0.0
    tol = max(s.threshold / 2 * spread, s.rel_guard * abs(base))
    recovered = _recovered_after(s, start, peak, base, tol)
    if recovered is None:
        cliff = _cliff(s, start)
        if cliff is not None:
            return cliff
    settled: float | None = None
    if recovered is None and s.kind in ("loss", "accuracy"):
        recovered, settled = settled_after(s.x, s.steps, start, peak, base, s.window)
    return _spike(s, group, peak, base, float(dev[peak]), recovered, settled)


def _recovered_after(s: _Stretch, start: int, peak: int, base: float, tol: float) -> float | None:
    """Steps from the spike's start until the series is back within ``tol`` of ``base`` (or beyond it in
    the good direction); None if it never is."""
    rest_values = s.x[peak + 1 :]
    if s.family.direction > 0:
        back = rest_values <= base + tol
    elif s.family.direction < 0:
        back = rest_values >= base - tol
    else:
        back = np.abs(rest_values - base) <= tol
    rest = np.flatnonzero(back)
    return float(s.steps[peak + 1 + int(rest[0])] - s.steps[start]) if rest.size else None


def _cliff(s: _Stretch, start: int) -> Finding | None:
    """A jump at ``start`` that did not come back, the level over the next window and the one after ≥ 50 %
    (the same way) from the level before: a cliff."""
    x, steps, window = s.x, s.steps, s.window
    level_before = float(np.median(x[max(0, start - window) : start]))
    after = x[start : start + window]
    later = x[start + window : start + 2 * window]
    shift_after = _relchange_text(level_before, float(np.median(after))) if after.size >= 5 else 0.0
    shift_later = _relchange_text(level_before, float(np.median(later))) if later.size >= 5 else shift_after
    is_shift = (
        abs(shift_after) >= 0.5 and abs(shift_later) >= 0.5 and np.sign(shift_after) == np.sign(shift_later)
    )
    if not is_shift or after.size < min(window, 10):
        return None
    new_level = float(np.median(later if later.size >= 5 else after))
    return Finding(
        CLIFF,
        s.family.shift_severity,
        s.run.name,
        s.metric,
        float(steps[start]),
        float(steps[min(start + window, len(steps) - 1)]),
        value=new_level,
        baseline=level_before,
        magnitude=shift_later,
        row=int(s.rows[start]),
        message=(
            f"{s.metric} {'jumped' if new_level > level_before else 'fell off a cliff'} at step "
            f"{step_text(steps[start])}: {fmt_value(level_before)} → {fmt_value(new_level)} "
            f"({change_text(level_before, new_level)}) and stayed there"
        ),
    )


def _spike(
    s: _Stretch,
    group: np.ndarray,
    peak: int,
    base: float,
    peak_dev: float,
    recovered: float | None,
    settled: float | None,
) -> Finding:
    x, steps, start = s.x, s.steps, int(group[0])
    ratio = float(x[peak] / base) if base else float("inf")
    level = abs(base)
    if s.family.signed and x.min() < 0:
        level = max(level, float(np.median(np.abs(x[max(0, start - s.window) : start + 1]))))
    size = abs(peak_dev) / max(level, 1e-12)
    severity = _severity(s, size, len(group), lasting=recovered is None and len(x) - 1 - peak >= SETTLE_ROWS)
    if recovered is None and peak == len(x) - 1:
        rec_text = "at the last row of the log"
    elif recovered is None:
        rec_text = "has not recovered by the end of the log"
    elif settled is not None:
        rec_text = (
            f"came most of the way back after {step_text(recovered)} step{'' if recovered == 1 else 's'}, "
            f"to {fmt_value(settled)} ({change_text(base, settled)} on {fmt_value(base)})"
        )
    else:
        rec_text = f"recovered after {step_text(recovered)} step{'' if recovered == 1 else 's'}"
    return Finding(
        SPIKE,
        severity,
        s.run.name,
        s.metric,
        float(steps[start]),
        float(steps[int(group[-1])]),
        value=float(x[peak]),
        baseline=base,
        magnitude=ratio,
        recovered_after=recovered,
        row=int(s.rows[start]),
        settled_at=settled,
        message=(
            f"{s.metric} spiked at step {step_text(steps[start])}: {fmt_value(base)} → "
            f"{fmt_value(float(x[peak]))} (×{ratio:.3g}), {rec_text}"
        ),
    )


def _severity(s: _Stretch, size: float, rows: int, *, lasting: bool) -> str:
    """From the size of the effect (``|peak − baseline| / level``): for losses and accuracies ``error`` from
    ×3 or when it stays up for good, ``warning`` from ×1.5 or over more than three rows; for a family with a
    ``warn_at`` (RL diagnostics) ``warning`` from there; ``info`` otherwise. A jump at the last rows of a log
    is judged by its size alone: nothing after it says whether it lasted."""
    if s.kind in ("loss", "accuracy"):
        if size >= 2.0 or lasting:
            return "error"
        return "warning" if rows > 3 or size >= 0.5 else "info"
    warn_at = s.family.warn_at
    return "warning" if warn_at is not None and size >= warn_at else "info"


__all__ = ["MIN_BASELINE", "SUSPECT_ROWS", "detect_spikes", "stretches"]
