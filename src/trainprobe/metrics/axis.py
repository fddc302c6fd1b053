"""From the columns a reader collected to a run: the step axis, the wall clock, the metric columns.

The step axis, in this order of preference:

1. a step-like key (``step``, ``iteration``, ``global_step``, llm.c's ``s``, ``Iter(train)``, …); when it
   starts again from the bottom each time an epoch key moves on (mmdetection's ``epoch`` + ``iter``), the two
   make one axis: ``(epoch - origin) × iterations per epoch + iter`` (origin: the first epoch logged, 0 or
   1; in a log that starts later, 1, or 0 for fractional epochs);
2. a counter (``[640/60000]``, a progress bar's ``100/1000``, ``200/ 2983 batches``): with an epoch key, the
   same two-counter axis (its total, or the largest value seen, is the period); alone, the step;
3. an epoch key (Keras, timm, Ultralytics, the HF Trainer's stdout): the epoch, fractional or not;
4. else the row number.

Rows without a step of their own (an eval line, a record's continuation) take the step of the row before.
Rows with nothing but a step (a header line ``Epoch 1/10``) give their step and are dropped; rows before the
first step that only hold keys never logged again (a config dump) are dropped too.

The wall clock: timestamps the reader saw, else a time field that counts up (``train_time:196649ms``,
``_timestamp``, ``elapsed``). A time field that does not count up (``time 267.36ms`` per iteration) is a
metric, not a clock.
"""

from __future__ import annotations

from contextvars import ContextVar
from itertools import pairwise

import numpy as np

from trainprobe.metrics.events import Event, merge_failures
from trainprobe.metrics.loops import forget_other_loops
from trainprobe.metrics.roles import role_of
from trainprobe.metrics.run_segments import run_segments
from trainprobe.metrics.side_streams import epoch_stream, eval_stream
from trainprobe.metrics.splits import is_epoch_key
from trainprobe.metrics.step_axis import Columns, interleaved_writers, step_axis
from trainprobe.metrics.table import INTERNAL, WALL_KEY, ColumnBuilder, FloatArray, RunLog, Table, is_absent

TIME_KEYS = frozenset(
    {
        "time",
        "timestamp",
        "_timestamp",
        "wall_time",
        "walltime",
        "wall",
        "elapsed",
        "train_time",
        "_runtime",
        "runtime",
        "elapsed_time",
        "time_s",
        "wallclock",
        "total_time",
    }
)
# ``--step KEY``: the column every run read in this context takes as its axis (set by
# trainprobe.metrics.reading.read_logs for the readers it calls, each of which ends in finish_run)
FORCED_STEP: ContextVar[str | None] = ContextVar("trainprobe_forced_step", default=None)
_UNIT_SECONDS = {
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
    "min": 60.0,
    "m": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
}


def _monotone(values: np.ndarray) -> bool:
    if values.size < 3:
        return values.size > 0
    d = np.diff(values)
    return bool(np.count_nonzero(d >= 0) >= 0.95 * d.size and values[-1] > values[0])


def wall_clock(cols: Columns, table: Table) -> np.ndarray | None:
    wall = table.wall
    if WALL_KEY in cols.cols:
        values, have = cols.pop(WALL_KEY)
        wall = np.where(have, values, wall)
    if np.isfinite(wall).any():
        return wall
    for key in list(cols.cols):
        if key.lower() not in TIME_KEYS:
            continue
        values, have = cols.cols[key], cols.have[key]
        if not _monotone(values[have]):
            continue  # a duration per iteration, not a clock: stays a metric
        scale = _UNIT_SECONDS.get(table.units.get(key, ""), 1.0)
        cols.pop(key)
        return np.where(have, values * scale, np.nan)
    return None


def _config_rows(cols: Columns, own: np.ndarray) -> np.ndarray:
    """Rows before the first step whose keys never come back (a config or argument dump)."""
    drop = np.zeros(cols.n, dtype=bool)
    if not own.any():
        return drop
    first = int(np.argmax(own))
    if first == 0:
        return drop
    later = {k for k, have in cols.have.items() if have[first:].any()}
    for i in range(first):
        keys = [k for k, have in cols.have.items() if have[i]]
        if keys and not any(k in later for k in keys):
            drop[i] = True
    return drop


def _subset(table: Table, rows: np.ndarray) -> Table:
    return Table(
        {k: v[rows] for k, v in table.columns.items() if (~is_absent(v[rows])).any()},
        table.wall[rows],
        table.order[rows],
        table.units,
    )


def _epoch_rows(table: Table, rows: np.ndarray, epoch: str) -> Table:
    """``rows`` of ``table``, each with the epoch it belongs to (its own, or that of the last row before it
    that has one)."""
    values = table.columns[epoch]
    have = ~is_absent(values)
    idx = np.maximum.accumulate(np.where(have, np.arange(values.shape[0]), 0))
    filled = dict(table.columns)
    filled[epoch] = values[idx]
    return _subset(Table(filled, table.wall, table.order, table.units), rows)


def assemble(
    table: Table, *, name: str, path: str, fmt: str, events: list[Event], skipped_lines: int
) -> RunLog:
    """The run of one table: an eval stream or once-an-epoch records written beside the main rows are side
    runs of their own (each assembled as a table of its own). A counter of another loop (an eval's progress
    bar between a train loop's epochs, :mod:`.loops`) is no step of either."""
    table = forget_other_loops(table)
    starts = run_segments(table)
    if starts is not None:
        return _assemble_segments(
            table, starts, name=name, path=path, fmt=fmt, events=events, skipped=skipped_lines
        )
    stream = eval_stream(table)
    per_epoch = epoch_stream(table) if stream is None else None
    if stream is not None:
        main, side, label = ~stream, _subset(table, np.flatnonzero(stream)), "eval"
    elif per_epoch is not None:
        coarse, epoch = per_epoch
        main, side, label = ~coarse, _epoch_rows(table, np.flatnonzero(coarse), epoch), "epoch"
    else:
        return _assemble_rows(
            table, name=name, path=path, fmt=fmt, events=events, skipped_lines=skipped_lines
        )
    run = assemble(
        _subset(table, np.flatnonzero(main)),
        name=name,
        path=path,
        fmt=fmt,
        events=events,
        skipped_lines=skipped_lines,
    )
    side_run = assemble(side, name=f"{name} ({label})", path=path, fmt=fmt, events=[], skipped_lines=0)
    run.side_runs = [*run.side_runs, side_run, *side_run.side_runs]
    return run


def _assemble_segments(
    table: Table, starts: list[int], *, name: str, path: str, fmt: str, events: list[Event], skipped: int
) -> RunLog:
    """Several runs of one file (:mod:`.run_segments`): the first is the run, the others its side runs, each
    with the events read among its own lines."""
    bounds = [0, *starts, len(table)]
    runs: list[RunLog] = []
    for i, (a, b) in enumerate(pairwise(bounds)):
        lo = -np.inf if i == 0 else float(table.order[a])
        hi = np.inf if b == len(table) else float(table.order[b])
        mine = [
            e for e in events if (e.order is None and i == 0) or (e.order is not None and lo <= e.order < hi)
        ]
        runs.append(
            assemble(
                _subset(table, np.arange(a, b)),
                name=name if i == 0 else f"{name} (run {i + 1}, from line {int(table.order[a]) + 1})",
                path=path,
                fmt=fmt,
                events=mine,
                skipped_lines=skipped if i == 0 else 0,
            )
        )
    first = runs[0]
    first.side_runs = [*first.side_runs, *(r for later in runs[1:] for r in (later, *later.side_runs))]
    return first


def _assemble_rows(
    table: Table, *, name: str, path: str, fmt: str, events: list[Event], skipped_lines: int
) -> RunLog:
    """One run of every row of ``table``: its step axis, its columns and their roles, its events placed."""
    cols = Columns(table)
    wall = wall_clock(cols, table)
    steps, own = step_axis(cols, FORCED_STEP.get())
    writers = interleaved_writers(steps, own)
    if writers > 1:
        cols.axis_why += f"; about {writers} writers interleaved in one file (their steps go back and forth)"
    for k in [k for k in cols.cols if k.startswith(INTERNAL)]:
        cols.pop(k)
    keep = np.zeros(cols.n, dtype=bool)
    for key, have in cols.have.items():
        if not is_epoch_key(key):
            keep |= have
    if not cols.cols:
        keep[:] = False
    keep &= ~_config_rows(cols, own)
    order = table.order
    if not keep.all():
        steps, order = steps[keep], order[keep]
        wall = wall[keep] if wall is not None else None
        for k in list(cols.cols):
            cols.cols[k], cols.have[k] = cols.cols[k][keep], cols.have[k][keep]
            if not cols.have[k].any():
                cols.pop(k)
    columns: dict[str, np.ndarray] = {}
    present: dict[str, np.ndarray] = {}
    for key, col in cols.cols.items():
        have = cols.have[key]
        if not have.all():
            present[key] = have
            col = np.where(have, col, np.nan)
        columns[key] = col
    roles = {
        key: role_of(key, col[present[key]] if key in present else col, table.units.get(key, ""))
        for key, col in columns.items()
    }
    placed = [_place(e, order, steps) for e in events]
    placed.sort(key=lambda e: (e.row, e.step))
    placed = merge_failures(placed)
    return RunLog(
        name=name,
        path=path,
        format=fmt,
        steps=np.asarray(steps, dtype=np.float64),
        columns=columns,
        present=present,
        wall=wall if wall is not None and np.isfinite(wall).any() else None,
        events=placed,
        skipped_lines=skipped_lines,
        roles=roles,
        declared_end=cols.declared_end,
        step_key=cols.axis,
        step_why=cols.axis_why,
        writers=writers,
    )


def _place(event: Event, order: np.ndarray, steps: np.ndarray) -> Event:
    """An event read at line ``event.order``: its row (the first row logged after it) and, if it named no
    step, the step of the row before it."""
    if event.order is None:
        return event
    row = int(np.searchsorted(order, event.order, side="left"))
    event.row = row
    if event.step is None or event.step != event.step:
        event.step = float(steps[row - 1]) if row > 0 else (float(steps[0]) if steps.size else 0.0)
    return event


def finish_run(
    builder: ColumnBuilder,
    *,
    name: str,
    path: str,
    fmt: str,
    wall: FloatArray | None = None,
    events: list[Event] | None = None,
    skipped_lines: int = 0,
    consume: bool = True,
) -> RunLog:
    """The run a reader collected: step axis, wall clock and metric columns."""
    table = builder.build(consume=consume)
    if wall is not None and wall.shape[0] == len(table) and np.isfinite(wall).any():
        table.wall = np.asarray(wall, dtype=np.float64)
    return assemble(table, name=name, path=path, fmt=fmt, events=events or [], skipped_lines=skipped_lines)


__all__ = ["FORCED_STEP", "TIME_KEYS", "assemble", "finish_run", "wall_clock"]
