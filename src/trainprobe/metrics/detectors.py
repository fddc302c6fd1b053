"""Detectors over one run's columns. Each returns findings without event context; ``analyze`` ties them
to events.

All of them are vectorized with numpy; the only Python loops run over *flagged* rows, which are few.
"""

from __future__ import annotations

import numpy as np

from trainprobe.metrics.findings import (
    CLIFF,
    DIVERGENCE,
    MISSING,
    NON_FINITE,
    SPIKE,
    STALL,
    THROUGHPUT,
    Finding,
    fmt_step,
    fmt_value,
)
from trainprobe.metrics.roles import is_step_time, metric_kind
from trainprobe.metrics.rolling import trailing_mad, trailing_median
from trainprobe.metrics.table import RunLog


def detect_spikes(
    run: RunLog, metric: str, *, threshold: float = 6.0, window: int = 50, rel_guard: float = 0.25
) -> list[Finding]:
    """Spikes (modified z-score against the trailing median/MAD, plus a relative guard) and cliffs (the level
    after the jump stays ≥ 50 % away from the level before)."""
    kind = metric_kind(metric)
    if kind in ("lr", "time", "counter"):
        return []
    col = run.columns[metric]
    rows = np.flatnonzero(run.mask(metric) & np.isfinite(col))
    if rows.size < 10:
        return []
    x = col[rows]
    if x.min() < 0:
        return []  # a loss that takes both signs (RL, GAN objectives): its jumps and ratios mean nothing
    med = trailing_median(x, window)
    mad = trailing_mad(x, med, window)
    scale = np.maximum(mad, 1e-3 * np.abs(med)) / 0.6745
    dev = x - med
    with np.errstate(invalid="ignore", divide="ignore"):
        z = dev / scale
        rel = np.abs(dev) / np.maximum(np.abs(med), 1e-12)
    direction = {"loss": 1, "accuracy": -1}.get(kind, 0)
    zz = z * direction if direction else np.abs(z)
    # Gradient norms and other auxiliary series are spiky by nature: only doublings are worth a line.
    guard = rel_guard if kind in ("loss", "accuracy") else max(rel_guard, 1.0)
    hit = (zz > threshold) & (rel > guard) & np.isfinite(med)
    prev = np.concatenate([[np.nan], x[:-1]])
    if kind == "loss":
        # Short logs (a few pasted lines) have no baseline yet: a loss that jumps ×1.5 from one row to the
        # next, within one stretch of steps (not across a resume), is a spike on its own.
        steps_here = run.steps[rows]
        same_stretch = np.concatenate([[False], np.diff(steps_here) > 0])
        with np.errstate(invalid="ignore"):
            hit |= same_stretch & (prev > 0) & (x >= 1.5 * prev) & ~np.isfinite(med)
    med = np.where(np.isfinite(med), med, prev)
    dev = x - med
    flagged = np.flatnonzero(hit)
    if flagged.size == 0:
        return []
    findings: list[Finding] = []
    groups = np.split(flagged, np.flatnonzero(np.diff(flagged) > 2) + 1)
    steps = run.steps[rows]
    for group in groups:
        start = int(group[0])
        peak = int(group[np.argmax(np.abs(dev[group]))])
        base = float(med[start])
        spread = float(scale[start])
        level_before = float(np.median(x[max(0, start - window) : start]))
        after = x[start : start + window]
        later = x[start + window : start + 2 * window]
        shift_after = _rel_change(level_before, float(np.median(after))) if after.size >= 5 else 0.0
        shift_later = _rel_change(level_before, float(np.median(later))) if later.size >= 5 else shift_after
        tol = max(threshold / 2 * spread, rel_guard * abs(base))
        rest = np.flatnonzero(np.abs(x[peak:] - base) <= tol)
        recovered = float(steps[peak + int(rest[0])] - steps[start]) if rest.size else None
        is_shift = (
            abs(shift_after) >= 0.5
            and abs(shift_later) >= 0.5
            and np.sign(shift_after) == np.sign(shift_later)
        )
        if is_shift and recovered is None and after.size >= min(window, 10):
            new_level = float(np.median(later if later.size >= 5 else after))
            findings.append(
                Finding(
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
                        f"{fmt_value(level_before)} → {fmt_value(new_level)} ({shift_later:+.0%}) "
                        "and stayed there"
                    ),
                )
            )
            continue
        ratio = float(x[peak] / base) if base else float("inf")
        size = abs(float(dev[peak])) / max(abs(base), 1e-12)
        if kind == "loss" or kind == "accuracy":
            if size >= 2.0 or recovered is None:
                severity = "error"
            elif len(group) > 3 or size >= 0.5:
                severity = "warning"
            else:
                severity = "info"
        else:
            severity = "info"
        rec_text = (
            f"recovered after {fmt_step(recovered)} step{'' if recovered == 1 else 's'}"
            if recovered is not None
            else "has not recovered by the end of the log"
        )
        findings.append(
            Finding(
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
        )
    return findings


def _rel_change(before: float, after: float) -> float:
    if before == 0:
        return 0.0 if after == 0 else float(np.sign(after))
    return (after - before) / abs(before)


def detect_nonfinite(run: RunLog, metric: str) -> list[Finding]:
    col = run.columns[metric]
    bad = np.flatnonzero(run.mask(metric) & ~np.isfinite(col))
    if bad.size == 0:
        return []
    kind = metric_kind(metric)
    severity = {"loss": "error", "accuracy": "error", "norm": "error", "lr": "error", "time": "info"}.get(
        kind, "warning"
    )
    first = int(bad[0])
    what = "NaN" if np.isnan(col[first]) else "Inf"
    return [
        Finding(
            NON_FINITE,
            severity,
            run.name,
            metric,
            float(run.steps[first]),
            float(run.steps[int(bad[-1])]),
            value=float(col[first]),
            magnitude=float(bad.size),
            row=first,
            message=(
                f"{metric} is {what} at step {fmt_step(run.steps[first])}"
                + (
                    f" ({bad.size} non-finite rows up to step {fmt_step(run.steps[int(bad[-1])])})"
                    if bad.size > 1
                    else ""
                )
            ),
        )
    ]


def detect_missing(run: RunLog) -> list[Finding]:
    """A field the usual row shape has, left out of an otherwise complete row (how Megatron hides a NaN
    step)."""
    names = run.metrics
    if not names or len(run) < 3:
        return []
    bits = np.zeros(len(run), dtype=np.int64)
    for j, name in enumerate(names[:62]):
        bits |= run.mask(name).astype(np.int64) << j
    shapes, counts = np.unique(bits, return_counts=True)
    usual = int(shapes[np.argmax(counts)])
    n_usual = bin(usual).count("1")
    findings: list[Finding] = []
    for shape in shapes:
        shape = int(shape)
        if shape == usual or shape & ~usual or bin(shape).count("1") < max(1, n_usual // 2):
            continue
        rows = np.flatnonzero(bits == shape)
        for j, name in enumerate(names[:62]):
            if not (usual >> j) & 1 or (shape >> j) & 1:
                continue
            first = int(rows[0])
            context = _loss_scale_context(run, first)
            findings.append(
                Finding(
                    MISSING,
                    "warning" if metric_kind(name) in ("loss", "accuracy", "norm") else "info",
                    run.name,
                    name,
                    float(run.steps[first]),
                    float(run.steps[int(rows[-1])]),
                    magnitude=float(rows.size),
                    row=first,
                    message=(
                        f"{name} is missing at step {fmt_step(run.steps[first])}"
                        + (f" ({rows.size} rows)" if rows.size > 1 else "")
                        + f" while the other fields are logged{context}; loggers such as Megatron leave out"
                        " a NaN/Inf value this way"
                    ),
                )
            )
    return findings


def _loss_scale_context(run: RunLog, row: int) -> str:
    for name, col in run.columns.items():
        if "loss scale" in name.lower() or "loss_scale" in name.lower():
            prev = np.flatnonzero(run.mask(name)[:row])
            if prev.size and np.isfinite(col[row]) and col[row] < col[int(prev[-1])]:
                before = fmt_value(float(col[int(prev[-1])]))
                return f" and {name} dropped {before} → {fmt_value(float(col[row]))}"
    return ""


def detect_divergence(run: RunLog, metric: str, *, blocks: int = 20) -> list[Finding]:
    """A sustained rise: the last block medians keep climbing well above the best level so far."""
    if metric_kind(metric) != "loss":
        return []
    col = run.columns[metric]
    rows = np.flatnonzero(run.mask(metric) & np.isfinite(col))
    if rows.size < blocks * 5:
        return []
    x = col[rows]
    if x.min() < 0:
        return []
    size = rows.size // blocks
    meds = np.median(x[: size * blocks].reshape(blocks, size), axis=1)
    best = int(np.argmin(meds))
    tail = meds[best:]
    if tail.size < 4 or not np.all(np.diff(tail[-4:]) > 0) or tail[-1] < 1.5 * meds[best]:
        return []
    onset = best * size + size // 2
    return [
        Finding(
            DIVERGENCE,
            "error",
            run.name,
            metric,
            float(run.steps[rows[onset]]),
            float(run.steps[rows[-1]]),
            value=float(tail[-1]),
            baseline=float(meds[best]),
            magnitude=float(tail[-1] / meds[best]),
            row=int(rows[onset]),
            message=(
                f"{metric} is diverging: it rose from {fmt_value(float(meds[best]))} around step "
                f"{fmt_step(run.steps[rows[onset]])} to {fmt_value(float(tail[-1]))} at the end "
                "and keeps rising"
            ),
        )
    ]


def row_gaps(run: RunLog) -> tuple[np.ndarray, np.ndarray]:
    """(row index, seconds since the step before) for the first row of each step with a wall clock.

    One wall time per step: the values of one step come at one moment (a TensorBoard event per tag, an
    actor and a critic line), so their microsecond gaps are no baseline. A step that goes back is a new run
    or a resume: the time before it is no gap of this run.
    """
    if run.wall is None:
        return np.empty(0, dtype=np.int64), np.empty(0)
    rows = np.flatnonzero(np.isfinite(run.wall))
    if rows.size < 2:
        return np.empty(0, dtype=np.int64), np.empty(0)
    steps = run.steps[rows]
    first = np.concatenate(([True], steps[1:] != steps[:-1]))
    rows, steps = rows[first], steps[first]
    gaps = np.diff(run.wall[rows])
    forward = np.diff(steps) > 0
    return rows[1:][forward], gaps[forward]


def detect_stalls(
    run: RunLog, *, factor: float = 5.0, floor_s: float = 10.0, window: int = 50, min_gaps: int = 10
) -> list[Finding]:
    rows, gaps = row_gaps(run)
    good = gaps > 0
    rows, gaps = rows[good], gaps[good]
    if rows.size < min_gaps:
        return []
    base = trailing_median(gaps, window)
    stall = np.flatnonzero((gaps >= factor * base) & (gaps >= floor_s) & np.isfinite(base))
    findings: list[Finding] = []
    wall = run.wall
    assert wall is not None
    for i in stall:
        row = int(rows[i])
        before = np.flatnonzero(np.isfinite(wall[:row]))
        prev_step = float(run.steps[before[-1]]) if before.size else float(run.steps[row])
        findings.append(
            Finding(
                STALL,
                "warning",
                run.name,
                "wall clock",
                prev_step,
                float(run.steps[row]),
                value=float(gaps[i]),
                baseline=float(base[i]),
                magnitude=float(gaps[i] / base[i]),
                row=row,
                message=(
                    f"logging stalled {gaps[i]:.0f} s between steps {fmt_step(prev_step)} and "
                    f"{fmt_step(run.steps[row])} (usual gap {base[i]:.3g} s)"
                ),
            )
        )
    return findings


def detect_throughput(run: RunLog, *, blocks: int = 10, factor: float = 1.5) -> list[Finding]:
    """Seconds per step that moved up and stayed up (from a step-time field, else from wall-clock gaps)."""
    per_step: np.ndarray | None = None
    rows: np.ndarray | None = None
    label = "seconds per step"
    for name in run.columns:
        if is_step_time(name):
            col = run.columns[name]
            rows = np.flatnonzero(run.mask(name) & np.isfinite(col))
            per_step, label = col[rows], name
            break
    if per_step is None:
        rows, gaps = row_gaps(run)
        if rows.size:
            dsteps = run.steps[rows] - run.steps[rows - 1]
            ok = (dsteps > 0) & (gaps > 0)
            rows, per_step = rows[ok], gaps[ok] / dsteps[ok]
    if per_step is None or rows is None or per_step.size < blocks * 10:
        return []
    size = per_step.size // blocks
    meds = np.median(per_step[: size * blocks].reshape(blocks, size), axis=1)
    for b in range(2, blocks - 1):
        before = float(np.median(meds[:b]))
        if before > 0 and np.all(meds[b:] >= factor * before):
            after = float(np.median(meds[b:]))
            # The onset lies in the block before the first slow one or in it; refine to the first row from
            # which a short running median crosses the midpoint between the two levels.
            lo, hi = (b - 1) * size, min(per_step.size, (b + 1) * size)
            region = per_step[lo:hi]
            k = min(5, region.size)
            runmed = np.median(np.lib.stride_tricks.sliding_window_view(region, k), axis=1)
            cross = np.flatnonzero(runmed >= (before + after) / 2)
            onset = int(rows[min(lo + (int(cross[0]) + k // 2 if cross.size else size), rows.size - 1)])
            return [
                Finding(
                    THROUGHPUT,
                    "warning",
                    run.name,
                    label,
                    float(run.steps[onset]),
                    float(run.steps[int(rows[-1])]),
                    value=after,
                    baseline=before,
                    magnitude=after / before,
                    row=onset,
                    message=(
                        f"training slowed down from around step {fmt_step(run.steps[onset])}: {label} "
                        f"{fmt_value(before)} → {fmt_value(after)} (×{after / before:.2g}) and stayed slower"
                    ),
                )
            ]
    return []


def detect_unfinished(run: RunLog) -> list[Finding]:
    """A log that stops before the last step it declares (``iteration 2130/ 1716613``, a golden file's
    ``end_step``): the run was killed, crashed, or is still going. ``info``: often that is the plan."""
    if run.declared_end is None or len(run) < 2 or not run.metrics:
        return []
    steps = np.unique(run.steps[np.isfinite(run.steps)])
    if steps.size < 2:
        return []
    last = float(steps[-1])
    gap = float(np.median(np.diff(steps)))
    if run.declared_end - last <= gap:
        return []
    metric = next((m for m in run.metrics if metric_kind(m) == "loss"), run.metrics[0])
    return [
        Finding(
            MISSING,
            "info",
            run.name,
            metric,
            last + gap,
            float(run.declared_end),
            magnitude=float(run.declared_end - last),
            row=len(run) - 1,
            message=(
                f"the log stops at step {fmt_step(last)} of the {fmt_step(run.declared_end)} it declares: "
                "the run was stopped, crashed, or is still running"
            ),
        )
    ]
