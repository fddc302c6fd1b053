"""Whether the step axis a run was read on can be trusted, judged from the rows it produced rather than from
how it was chosen: a guess of a log's structure that went wrong shows in what it made of the data, whatever
the log looked like. A run that fails here is read only in part (``LogReport.partly_read``), never healthy:
its series are not in an order the detectors can read.

- **crowded steps**: one metric's values pile up on a few steps, different values on each
  (``mAP`` 29 times at step 20; ``loss`` ten times an epoch on an epoch axis). The axis counts something
  coarser than the records (an epoch where a counter inside it starts over, a counter that only one kind of
  line carries), so a series meant to run along the steps is a stack of values at one point. A line logged
  twice (the same value at the same step), restarts that log the same steps again (each pass in order) and
  two lines that share a name (two values a step) are not crowding.
- **an axis that starts over and over**: the steps fall back to where they began ten times or more. A run
  started again now and then does that a few times; this often, the axis is more likely a counter inside a
  loop the log does not name (a batch index with no epoch beside it), and which pass a row is of is unknown.
"""

from __future__ import annotations

import numpy as np

from trainprobe.metrics.table import RunLog

# fewer values than this are too few to tell crowding from a resume that logged a step again
_MIN_VALUES = 6
# a metric is crowded when its distinct (step, value) pairs are at least this many times its distinct steps:
# two a step is the common shape of two lines that share a name (a train and an eval ``accuracy``, an actor's
# and a critic's ``lr``), a series of its own each, not an axis that lost its records' order
_CROWDING = 3.0
# and when at least this share of its rows follow one at the same step with another value
_SIDE_BY_SIDE = 0.5


def _crowding(steps: np.ndarray, values: np.ndarray) -> tuple[int, int] | None:
    """(distinct values at shared steps, distinct steps) when the values outnumber the steps they stand on
    by ``_CROWDING``, else None."""
    if steps.size < _MIN_VALUES:
        return None
    # restarts and appended runs log the same steps again in passes of their own, each in order; an axis too
    # coarse for its records holds the values side by side, one row after another at one step (checked
    # first: one pass over the rows, where the usual series, one value a step in order, has none)
    side_by_side = (steps[1:] == steps[:-1]) & (values[1:] != values[:-1])
    if np.count_nonzero(side_by_side) < _SIDE_BY_SIDE * side_by_side.size:
        return None
    distinct_steps = int(np.unique(steps).size)
    if steps.size < _CROWDING * distinct_steps:
        return None
    # NaN != NaN, so a log of NaNs at one step would count every one as new: compare them as one value
    pairs = np.unique(np.stack([steps, np.nan_to_num(values, nan=np.inf)]), axis=1).shape[1]
    if pairs < _CROWDING * distinct_steps:
        return None
    return pairs, distinct_steps


def counts_up(values: np.ndarray) -> bool:
    """Whole numbers that count up (a resume may step back now and then), with at least 3 distinct ones."""
    if (
        values.size < 3
        or not bool(np.all(np.isfinite(values)))
        or not bool(np.all(values == np.floor(values)))
    ):
        return False
    d = np.diff(values)
    return bool(
        values.min() >= 0
        and values[-1] > values[0]
        and np.count_nonzero(d >= 0) >= 0.95 * d.size
        and np.unique(values).size >= 3
    )


def _counts_in_passes(values: np.ndarray) -> bool:
    """Whole numbers that count up and fall back to where they began, again and again (a batch index inside
    epochs the log does not name), with at least 3 distinct ones."""
    if values.size < 2 * _MANY_STARTS or not bool(np.all(values == np.floor(values))):
        return False
    d = np.diff(values)
    falls = d < 0
    return bool(
        np.count_nonzero(falls) >= _MANY_STARTS // 2
        and np.all(values[1:][falls] == values.min())
        and np.count_nonzero(d > 0) >= 0.5 * d.size
        and np.unique(values).size >= 3
    )


def uncounted_rows(run: RunLog) -> str | None:
    """Why a run whose rows stand at their row numbers is read only in part: a column of it counts up in
    whole numbers (an ``epoch_id``, a ``Progress/tick``, a table's example counter), or counts up in passes
    that start over (a batch index inside epochs the log does not name) — a counter was there and no rule
    understood it, so the steps of everything read are guesses."""
    for name, values in run.columns.items():
        logged = values[run.mask(name)]
        if not bool(np.all(np.isfinite(logged))):
            continue
        if counts_up(logged):
            return (
                f"no step axis: its {len(run)} rows stand at their row numbers, yet {name!r} counts up "
                f"({logged[0]:g} to {logged[-1]:g}): --step {name} reads it as the step"
            )
        if _counts_in_passes(logged):
            return (
                f"no step axis: its {len(run)} rows stand at their row numbers, yet {name!r} counts up in "
                f"passes that start over at {logged.min():g}: a loop inside one the log does not name"
            )
    return None


# this many falls back to the start make an axis that starts over and over
_MANY_STARTS = 10
# a fall lands "where the run began" within this share of the axis's range above its lowest step
_START_BAND = 0.05


def starts_over(run: RunLog) -> str | None:
    """Why ``run``'s axis cannot order its rows when it falls back to its start again and again, or None."""
    steps = run.steps
    if steps.size < 2 * _MANY_STARTS:
        return None
    d = np.diff(steps)
    if np.count_nonzero(d < 0) < _MANY_STARTS:
        return None
    low = float(steps.min())
    band = low + _START_BAND * (float(steps.max()) - low)
    starts = int(np.count_nonzero((d < 0) & (steps[1:] <= band)))
    if starts < _MANY_STARTS:
        return None
    axis = f"its axis {run.step_key!r}" if run.step_key is not None else "its row-number axis"
    return (
        f"{axis} starts over {starts} times (back to {low:g}): restarts this many are more likely a loop "
        "the log does not name, so which pass a row is of is not known (--step KEY reads another column)"
    )


def crowded_steps(run: RunLog) -> str | None:
    """Why ``run``'s axis does not tell its rows apart: the metric whose values crowd the fewest steps (see
    the module), or None."""
    worst: tuple[float, str, int, int] | None = None
    for name in run.metrics:
        rows = run.mask(name)
        got = _crowding(run.steps[rows], run.columns[name][rows])
        if got is None:
            continue
        pairs, distinct = got
        if worst is None or pairs / distinct > worst[0]:
            worst = (pairs / distinct, name, pairs, distinct)
    if worst is None:
        return None
    _, name, pairs, distinct = worst
    axis = f"the axis {run.step_key!r}" if run.step_key is not None else "the row-number axis"
    return (
        f"{name!r} has {pairs} different values on {distinct} step{'s' if distinct != 1 else ''} of "
        f"{axis}: it counts something coarser than the records, so their order is not known"
    )


__all__ = ["counts_up", "crowded_steps", "starts_over", "uncounted_rows"]
