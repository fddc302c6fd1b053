"""Detectors of what is absent or late: non-finite values, fields left out, runs that stop short, logging
stalls and slowdowns."""

from __future__ import annotations

import numpy as np

from trainprobe.conventions import step_text
from trainprobe.metrics.findings import (
    MISSING,
    NON_FINITE,
    STALL,
    THROUGHPUT,
    Finding,
    fmt_value,
)
from trainprobe.metrics.roles import is_step_time, metric_kind
from trainprobe.metrics.rolling import trailing_median
from trainprobe.metrics.table import RunLog


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
                f"{metric} is {what} at step {step_text(run.steps[first])}"
                + (
                    f" ({bad.size} non-finite rows up to step {step_text(run.steps[int(bad[-1])])})"
                    if bad.size > 1
                    else ""
                )
            ),
        )
    ]


def detect_missing(run: RunLog) -> list[Finding]:
    """A field the usual row shape has, left out of an otherwise complete row (how Megatron hides a NaN
    step). Not before the field's first row: a field that first appears at the first validation is not
    missing before it. After its last row in that stretch of steps (or in a stretch it never appears in) only
    with a sign of a skipped step (the loss scale cut, a skipped-iterations count that went up), as on
    Megatron's last row: without one, rows after the field's last are a pass without it (inference, an
    evaluation-only pass, a closing summary), not a hidden NaN."""
    names = run.metrics
    if not names or len(run) < 3:
        return []
    bits = np.zeros(len(run), dtype=np.int64)
    for j, name in enumerate(names[:62]):
        bits |= run.mask(name).astype(np.int64) << j
    shapes, counts = np.unique(bits, return_counts=True)
    # the usual shapes: the rows a logger writes often (train rows, and train rows once evals began)
    usual_shapes = [int(s) for s, c in zip(shapes, counts, strict=True) if c >= max(3, 0.05 * len(run))]
    findings: list[Finding] = []
    stretch = np.concatenate([[0], np.cumsum(np.diff(run.steps) < 0)])
    for shape in shapes:
        shape = int(shape)
        supersets = [u for u in usual_shapes if u != shape and not shape & ~u]
        if shape in usual_shapes or not supersets:
            continue
        usual = min(supersets, key=lambda u: bin(u).count("1"))
        if bin(shape).count("1") < max(1, bin(usual).count("1") // 2):
            continue
        shape_rows = np.flatnonzero(bits == shape)
        for j, name in enumerate(names[:62]):
            if not (usual >> j) & 1 or (shape >> j) & 1:
                continue
            logged = np.flatnonzero(run.mask(name))
            rows = shape_rows[shape_rows > logged[0]] if logged.size else logged
            inside = _inside(stretch, logged, rows)
            rows = rows[inside | _skipped_steps(run, rows, ~inside)]
            if rows.size == 0:
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
                        f"{name} is missing at step {step_text(run.steps[first])}"
                        + (f" ({rows.size} rows)" if rows.size > 1 else "")
                        + f" while the other fields are logged{context}; loggers such as Megatron leave out"
                        " a NaN/Inf value this way"
                    ),
                )
            )
    return findings


def _inside(stretch: np.ndarray, logged: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``: whether it lies between two rows where the field is logged (``logged``), in
    one stretch of steps (``stretch``: each row's stretch number)."""
    at = np.searchsorted(logged, rows)
    before = logged[np.maximum(at - 1, 0)]
    after = logged[np.minimum(at, logged.size - 1)]
    inside: np.ndarray = (at > 0) & (at < logged.size) & (stretch[before] == stretch[after])
    return inside


# rows without a field after its last one checked for a skipped step: more of them are a pass without it
_TRAILING_CHECKED = 10


def _skipped_steps(run: RunLog, rows: np.ndarray, outside: np.ndarray) -> np.ndarray:
    """For each of ``rows``: whether it is one of the first ``outside`` ones and says its step was skipped."""
    out = np.zeros(rows.size, dtype=bool)
    for i in np.flatnonzero(outside)[:_TRAILING_CHECKED]:
        out[i] = _skipped_step(run, int(rows[i]))
    return out


def _skipped_step(run: RunLog, row: int) -> bool:
    """Whether the row says its step was skipped: the loss scale cut, or a skipped-iterations count up."""
    if _loss_scale_context(run, row):
        return True
    for name, col in run.columns.items():
        if "skipped" in name.lower():
            prev = np.flatnonzero(run.mask(name)[:row])
            if prev.size and np.isfinite(col[row]) and col[row] > col[int(prev[-1])]:
                return True
    return False


def _loss_scale_context(run: RunLog, row: int) -> str:
    for name, col in run.columns.items():
        if "loss scale" in name.lower() or "loss_scale" in name.lower():
            prev = np.flatnonzero(run.mask(name)[:row])
            if prev.size and np.isfinite(col[row]) and col[row] < col[int(prev[-1])]:
                before = fmt_value(float(col[int(prev[-1])]))
                return f" and {name} dropped {before} → {fmt_value(float(col[row]))}"
    return ""


def row_gaps(run: RunLog) -> tuple[np.ndarray, np.ndarray]:
    """(row index, seconds since the step before) for the first row of each step with a wall clock.

    One wall time per step: the values of one step come at one moment (a TensorBoard event per tag, an
    actor and a critic line), so their microsecond gaps are no baseline. A step that goes back is a new run
    or a resume: the time before it is no gap of this run; nor is the time before a step's line written
    again (a restart that began where the last run did).
    """
    rows, gaps, _dsteps = _step_gaps(run)
    return rows, gaps


def _step_gaps(run: RunLog) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, gaps, dsteps, _starts = _step_gaps_by_start(run)
    return rows, gaps, dsteps


def _step_gaps_by_start(run: RunLog) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(row, seconds, steps since the step before, which start of the run) of each step forward."""
    if run.wall is None:
        return np.empty(0, dtype=np.int64), np.empty(0), np.empty(0), np.empty(0, dtype=np.int64)
    rows = np.flatnonzero(np.isfinite(run.wall))
    if rows.size < 2:
        return np.empty(0, dtype=np.int64), np.empty(0), np.empty(0), np.empty(0, dtype=np.int64)
    steps = run.steps[rows]
    shape = _row_shapes(run)[rows]
    # a step's lines begin where the step changes, or where the line its step already had comes again (a
    # restart that writes the step the last run ended at: the time between the two runs is no stall); an
    # eval line of the step (another shape) belongs to it, and the time it took counts
    first = np.concatenate(([True], (steps[1:] != steps[:-1]) | (shape[1:] == shape[:-1])))
    firsts = rows[first]
    gaps = np.diff(run.wall[firsts])
    dsteps = np.diff(steps[first])
    forward = dsteps > 0
    starts = np.cumsum(~forward)
    return firsts[1:][forward], gaps[forward], dsteps[forward], starts[forward]


def _row_shapes(run: RunLog) -> np.ndarray:
    """A number per row that says which metrics it holds (its line shape)."""
    bits = np.zeros(len(run), dtype=np.int64)
    for j, name in enumerate(run.metrics[:62]):
        bits |= run.mask(name).astype(np.int64) << j
    return bits


def detect_stalls(
    run: RunLog, *, factor: float = 5.0, floor_s: float = 10.0, window: int = 50, min_gaps: int = 10
) -> list[Finding]:
    rows, gaps, dsteps, starts = _step_gaps_by_start(run)
    good = gaps > 0
    rows, gaps, dsteps, starts = rows[good], gaps[good], dsteps[good], starts[good]
    if rows.size < min_gaps:
        return []
    # judged per step: 5,000 s between steps 370 and 7040 of an excerpt (the lines between left out) is
    # no stall when a step takes 0.75 s
    per_step = gaps / dsteps
    usual = _usual_per_start(per_step, starts, window)
    base = usual * dsteps
    stall = np.flatnonzero((per_step >= factor * usual) & (gaps >= floor_s) & np.isfinite(usual))
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
                    f"logging stalled {gaps[i]:.0f} s between steps {step_text(prev_step)} and "
                    f"{step_text(run.steps[row])} (usual gap {base[i]:.3g} s)"
                ),
            )
        )
    return findings


# more starts than this in one run are interleaved writers or a log of snippets: one baseline for all
_MAX_STARTS = 200


def _usual_per_start(per_step: np.ndarray, starts: np.ndarray, window: int) -> np.ndarray:
    """The trailing median of seconds per step within each start of the run: a restart is a new run, its
    pace its own (a restart with another configuration runs five times slower from its first step, which
    is no stall), and its first gaps have no baseline yet."""
    bounds = np.flatnonzero(np.diff(starts)) + 1
    if bounds.size == 0 or bounds.size > _MAX_STARTS:
        return trailing_median(per_step, window)
    return np.concatenate([trailing_median(part, window) for part in np.split(per_step, bounds)])


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
                        f"training slowed down from around step {step_text(run.steps[onset])}: {label} "
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
                f"the log stops at step {step_text(last)} of the {step_text(run.declared_end)} it declares: "
                "the run was stopped, crashed, or is still running"
            ),
        )
    ]
