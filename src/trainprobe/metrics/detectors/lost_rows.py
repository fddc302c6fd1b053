"""Lost rows: a series logged at a fixed step interval with one or two holes of two or three intervals in it.

A logger that drops a record, or a file that lost a few of its lines (CSRA-Paddle's epoch 18: its whole
evaluation absent while every other epoch has one), leaves a hole in an otherwise regular series: the step
interval (the common difference of its steps) holds everywhere but for a jump of two or three intervals. That
is one ``missing_value`` warning per hole, on the fields that share it (one finding names the others).

What this detector leaves alone, as other detectors' business or as no sign of loss:

- a series whose intervals vary (a step between its rows that is no multiple of the usual one, other than at
  its first or last row: a row at step 0 or at the final step is off the grid in many healthy logs);
- more than :data:`MAX_HOLES` holes: a logger that skips rows as a habit logs on a coarser grid;
- a hole wider than :data:`MAX_INTERVALS` intervals (a stretch of the run with no log, a logging pause);
- a series whose step goes back or repeats (a resume, a restart, several writers), and a hole with a resume
  or a failure inside it: the rows were never written, the run stopped there;
- a hole that :func:`~trainprobe.metrics.detectors.gaps.detect_missing` already told (a field left out of
  rows that are there).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trainprobe.conventions import step_text
from trainprobe.metrics.events import FAILURE, RESUME, Event
from trainprobe.metrics.findings import MISSING, Finding, fmt_value
from trainprobe.metrics.table import RunLog

# intervals in a row, at least, before a series is taken as logged on a grid (and per hole found)
MIN_REGULAR = 8
REGULAR_PER_HOLE = 5
MAX_HOLES = 2
MAX_INTERVALS = 3
# how far a step difference may lie from a whole number of intervals (as a fraction of one interval)
_GRID_TOLERANCE = 0.01


def holes(steps: np.ndarray) -> list[tuple[int, int]]:
    """The holes of a series (its steps in row order): ``(i, k)`` for the jump from ``steps[i]`` to
    ``steps[i + 1]`` of ``k`` intervals (2 or 3), when the series is logged on a fixed grid with at most
    :data:`MAX_HOLES` of them; none otherwise."""
    d = np.diff(steps)
    if d.size < MIN_REGULAR + 1 or not np.all(np.isfinite(d)) or np.any(d <= 0):
        return []
    inner = d[1:-1]
    # on a grid with few holes most differences are the interval, so their median is it
    interval = float(np.median(inner))
    ratio = inner / interval
    k = np.rint(ratio)
    on_grid = np.abs(ratio - k) <= _GRID_TOLERANCE
    if not np.all(on_grid) or np.any(k > MAX_INTERVALS):
        return []
    at = np.flatnonzero(k >= 2)
    regular = inner.size - at.size
    if at.size == 0 or at.size > MAX_HOLES or regular < max(MIN_REGULAR, REGULAR_PER_HOLE * at.size):
        return []
    return [(int(i) + 1, int(k[i])) for i in at]


def detect_lost_rows(
    run: RunLog, events: Sequence[Event] = (), told: Sequence[Finding] = ()
) -> list[Finding]:
    """One ``missing_value`` warning per hole of the run's regular series (see the module)."""
    stops = np.array([e.step for e in events if e.kind in (RESUME, FAILURE)], dtype=float)
    by_hole: dict[tuple[float, float], list[tuple[str, int, int]]] = {}
    for metric in run.metrics:
        rows = np.flatnonzero(run.mask(metric))
        steps = run.steps[rows]
        for i, k in holes(steps):
            before, after = float(steps[i]), float(steps[i + 1])
            if stops.size and np.any((stops >= before) & (stops <= after)):
                continue
            if any(_told(f, metric, before, after) for f in told):
                continue
            by_hole.setdefault((before, after), []).append((metric, k, int(rows[i + 1])))
    return [_finding(run, before, after, fields) for (before, after), fields in sorted(by_hole.items())]


def _told(f: Finding, metric: str, before: float, after: float) -> bool:
    return f.kind == MISSING and f.metric == metric and before < f.end_step and f.step < after


def _finding(run: RunLog, before: float, after: float, fields: list[tuple[str, int, int]]) -> Finding:
    metric, k, row = fields[0]
    interval = (after - before) / k
    first, last = before + interval, after - interval
    lost = k - 1
    where = f"step {step_text(first)}" if lost == 1 else f"steps {step_text(first)} to {step_text(last)}"
    every = "every step" if interval == 1 else f"every {fmt_value(interval)} steps"
    others = [m for m, _k, _r in fields[1:]]
    also = ""
    if others:
        shown = ", ".join(others[:4]) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
        also = f" (and {shown}, logged in the same rows)"
    return Finding(
        MISSING,
        "warning",
        run.name,
        metric,
        first,
        last,
        magnitude=float(lost),
        row=row,
        message=(
            f"{metric} has no row at {where}{also}, between steps {step_text(before)} and "
            f"{step_text(after)}, while it is logged {every} elsewhere: "
            f"{'a row was' if lost == 1 else f'{lost} rows were'} lost (a logger that dropped records, "
            "or lines missing from the file)"
        ),
        suggestion="look at how the logger writes (a buffered or asynchronous writer that drops records, "
        "a rotated or truncated file) before trusting a metric computed over these steps",
    )


__all__ = ["MAX_HOLES", "MAX_INTERVALS", "detect_lost_rows", "holes"]
