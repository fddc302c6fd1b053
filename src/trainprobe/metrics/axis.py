"""From the columns a reader collected to a run: the step axis, the wall clock, the metric columns.

The step axis, in this order of preference:

1. a step-like key (``step``, ``iteration``, ``global_step``, llm.c's ``s``, ``Iter(train)``, …); when it
   starts again from the bottom each time an epoch key moves on (mmdetection's ``epoch`` + ``iter``), the two
   make one axis: ``(epoch - first epoch) × iterations per epoch + iter``;
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

import numpy as np

from trainprobe.metrics.events import Event
from trainprobe.metrics.roles import metric_kind, role_of
from trainprobe.metrics.splits import EVAL, base_name, is_epoch_key, is_step_key, split_of
from trainprobe.metrics.table import INTERNAL, TOTAL_PREFIX, WALL_KEY, RunLog, Table, is_absent

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
COUNTER_KEY = "#counter"
_STEP_PREFERENCE = (
    "global_step",
    "globalstep",
    "global step",
    "trainer/global_step",
    "train/global_step",
    "_step",
    "step",
    "iteration",
    "iter",
    "num_updates",
    "optimizer_step",
    "steps",
    "it",
    "s",
    "update",
    "updates",
)


def _ffill(values: np.ndarray, have: np.ndarray, before: float = 0.0) -> np.ndarray:
    """Rows without a value take the last row's that had one (``before`` until the first)."""
    if have.all():
        return np.asarray(values, dtype=np.float64)
    idx = np.where(have, np.arange(values.shape[0]), 0)
    np.maximum.accumulate(idx, out=idx)
    out = np.asarray(values[idx], dtype=np.float64)
    first = int(np.argmax(have)) if have.any() else values.shape[0]
    out[:first] = before
    return out


class _Columns:
    def __init__(self, table: Table) -> None:
        self.cols = table.columns
        self.have = {k: ~is_absent(v) for k, v in self.cols.items()}
        self.n = len(table)
        self.declared_end: float | None = None

    def pop(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        return self.cols.pop(key), self.have.pop(key)


def _two_counter(
    outer: np.ndarray, outer_have: np.ndarray, inner: np.ndarray, inner_have: np.ndarray, total: float | None
) -> np.ndarray | None:
    """``(epoch - first) × period + counter`` when the counter starts over as the epoch moves on."""
    both = np.flatnonzero(outer_have & inner_have)
    if both.size < 2:
        return None
    ep = _ffill(outer, outer_have, float(outer[both[0]]))
    c = inner[both]
    drops = np.flatnonzero(np.diff(c) < 0) + 1
    if drops.size == 0:
        return None
    moved = np.diff(ep[both]) > 0
    if np.count_nonzero(moved[drops - 1]) < 0.8 * drops.size:
        return None
    period = total if total is not None and total > 0 else float(np.max(c))
    if period <= 0:
        return None
    first = float(ep[both[0]])
    counter = _ffill(inner, inner_have)
    # An eval row after an epoch's last batch sits at that epoch's end.
    return np.asarray((np.floor(ep) - np.floor(first)) * period + counter)


def _signatures(cols: _Columns, rows: np.ndarray) -> np.ndarray:
    """A number per row that says which columns it has (its line shape)."""
    sig = np.zeros(rows.size, dtype=np.uint64)
    for j, have in enumerate(list(cols.have.values())[:63]):
        sig |= have[rows].astype(np.uint64) << np.uint64(j)
    return sig


def _dominant_stream(cols: _Columns, values: np.ndarray, have: np.ndarray) -> np.ndarray:
    """Rows whose own step counts: when two line shapes carry one step key that the two count differently
    (DeepSpeed's engine ``step=100`` between a PPO loop's ``step: 98`` and ``step: 99``), the shape with the
    most rows is the axis, provided it counts up on its own; the other lines take its step, as rows without
    one do. One shape that goes back is a resume and stays as it is."""
    # (no index or copy of a whole column for the usual log)
    if have.all() and (values.size < 3 or not (values[1:] < values[:-1]).any()):
        return have
    rows = np.flatnonzero(have)
    if rows.size < 3 or not (np.diff(values[rows]) < 0).any():
        return have
    sig = _signatures(cols, rows)
    shapes, counts = np.unique(sig, return_counts=True)
    if shapes.size < 2:
        return have
    main = rows[sig == shapes[np.argmax(counts)]]
    if main.size < 0.5 * rows.size or (np.diff(values[main]) < 0).any():
        return have
    out = np.zeros_like(have)
    out[main] = True
    return out


def _total_of(cols: _Columns, key: str, *, constant: bool = False) -> float | None:
    """The ``M`` of a key's ``N/M`` (with ``constant``: only when every line says the same)."""
    name = TOTAL_PREFIX + key
    if name not in cols.cols:
        return None
    values = cols.cols[name][cols.have[name]]
    if not values.size or (constant and not bool(np.all(values == values[0]))):
        return None
    return float(np.median(values))


def _completed(cols: _Columns, key: str) -> bool:
    """A counter that always equals its total (Keras's ``4/4`` once an epoch is done) counts nothing."""
    total = TOTAL_PREFIX + key
    if total not in cols.cols:
        return False
    have = cols.have[key] & cols.have[total]
    return bool(have.any() and np.all(cols.cols[key][have] == cols.cols[total][have]))


def _step_rank(key: str) -> int:
    """Which step key is the axis when a line has several (fairseq: ``num_updates`` before ``update``)."""
    low = base_name(key)
    return _STEP_PREFERENCE.index(low) if low in _STEP_PREFERENCE else len(_STEP_PREFERENCE)


def step_axis(cols: _Columns) -> tuple[np.ndarray, np.ndarray]:
    """(steps, rows that had a step of their own); consumes the step, counter and total columns."""
    n = cols.n
    keys = list(cols.cols)
    step_keys = [k for k in keys if not k.startswith(INTERNAL) and is_step_key(k)]
    epoch_keys = [k for k in keys if not k.startswith(INTERNAL) and is_epoch_key(k)]
    counters = [
        k
        for k in keys
        if (
            k == COUNTER_KEY or (TOTAL_PREFIX + k in cols.cols and k not in step_keys and k not in epoch_keys)
        )
        and not _completed(cols, k)
    ]
    # the step key most rows carry is the axis (a PPO loop's ``step: N`` on every line, not the engine's
    # ``global_step=N`` every tenth); among keys on as many rows, the usual names first
    step_keys.sort(key=lambda k: (-int(np.count_nonzero(cols.have[k])), _step_rank(k)))
    epoch = epoch_keys[0] if epoch_keys else None
    steps: np.ndarray | None = None
    own = np.zeros(n, dtype=bool)
    primary = step_keys[0] if step_keys else (counters[0] if counters else None)
    if primary is not None:
        values, have = cols.cols[primary], cols.have[primary]
        if epoch is not None:
            steps = _two_counter(cols.cols[epoch], cols.have[epoch], values, have, _total_of(cols, primary))
        if steps is None:
            have = _dominant_stream(cols, values, have)
            # Further step-like keys (e.g. "validation loss at iteration") fill the rows the first left empty,
            # where they fit between the steps around them.
            filled, got = values, have
            if len(step_keys) > 1 and not have.all():  # (only then: these are a few columns' worth of memory)
                filled, got = values.copy(), have.copy()
                before = _ffill(values, have, -np.inf)
                after = -_ffill(-values[::-1], have[::-1], -np.inf)[::-1]
                for other in step_keys[1:]:
                    extra = cols.cols[other]
                    fill = ~got & cols.have[other] & (extra >= before) & (extra <= after)
                    filled[fill] = extra[fill]
                    got |= fill
                del before, after
            steps = _ffill(filled, got)
            own = got
            cols.declared_end = _total_of(cols, primary, constant=True)
        else:
            own = have | cols.have[epoch]  # type: ignore[index]
        cols.pop(primary)
        for other in step_keys[1:]:
            own |= cols.have[other]
            cols.pop(other)
        if primary in counters:
            counters.remove(primary)
    elif epoch is not None:
        values, have = cols.cols[epoch], cols.have[epoch]
        steps = _ffill(values, have)
        own = have.copy()
        cols.declared_end = _total_of(cols, epoch, constant=True)
    if steps is None:
        steps = np.arange(n, dtype=np.float64)
        own = np.ones(n, dtype=bool)
    for k in counters:
        if k in cols.cols and k.startswith(INTERNAL):
            cols.pop(k)
    for k in [k for k in cols.cols if k.startswith(TOTAL_PREFIX)]:
        cols.pop(k)
    return steps, own


def _monotone(values: np.ndarray) -> bool:
    if values.size < 3:
        return values.size > 0
    d = np.diff(values)
    return bool(np.count_nonzero(d >= 0) >= 0.95 * d.size and values[-1] > values[0])


def wall_clock(cols: _Columns, table: Table) -> np.ndarray | None:
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


def _config_rows(cols: _Columns, own: np.ndarray) -> np.ndarray:
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


def _eval_stream(table: Table) -> np.ndarray | None:
    """Rows of an eval stream with an axis of its own, or None. mmengine counts its val loop in epochs
    beside the train loop's iterations: ``Epoch(val) [3][7/7]`` beside ``Epoch(train) [3][10/50]``, or
    ``step`` 1, 2, 3 on the val rows of ``scalars.json`` between train rows at ``step`` 50, 100, 150. Such
    rows become a run of their own (``<name> (eval)``) on their own axis; eval rows that fit the train axis
    stay where they are."""
    cols = _Columns(table)
    metrics = [
        k for k in cols.cols if not k.startswith(INTERNAL) and not is_step_key(k) and not is_epoch_key(k)
    ]
    evals = [k for k in metrics if split_of(k) == EVAL]
    if not evals or len(evals) == len(metrics):
        return None
    is_eval_row = np.zeros(cols.n, dtype=bool)
    for k in evals:
        is_eval_row |= cols.have[k]
    for k in metrics:
        if k not in evals and metric_kind(k) not in ("time", "counter"):
            is_eval_row &= ~cols.have[k]
    if not is_eval_row.any() or is_eval_row.all():
        return None
    epochs = [k for k in cols.cols if is_epoch_key(k)]
    if len(epochs) > 1:
        main = max(epochs, key=lambda k: int(np.count_nonzero(cols.have[k] & ~is_eval_row)))
        other = [k for k in epochs if k != main and (cols.have[k] & is_eval_row).any()]
        if other and not (cols.have[main] & is_eval_row).any():
            return is_eval_row
    steps = [k for k in cols.cols if is_step_key(k)]
    for key in steps:
        own, train = cols.have[key] & is_eval_row, cols.have[key] & ~is_eval_row
        if own.sum() < 2 or train.sum() < 2:
            continue
        merged = cols.cols[key][own | train]
        alone = cols.cols[key][own]
        train_alone = cols.cols[key][train]
        # the train rows counting up on their own (not an iteration within each epoch, as mmdetection's)
        if (
            (np.diff(merged) < 0).any()
            and not (np.diff(alone) < 0).any()
            and not (np.diff(train_alone) < 0).any()
        ):
            return is_eval_row
    return None


def assemble(
    table: Table, *, name: str, path: str, fmt: str, events: list[Event], skipped_lines: int
) -> RunLog:
    stream = _eval_stream(table)
    if stream is not None:
        run = assemble(
            _subset(table, np.flatnonzero(~stream)),
            name=name,
            path=path,
            fmt=fmt,
            events=events,
            skipped_lines=skipped_lines,
        )
        side = assemble(
            _subset(table, np.flatnonzero(stream)),
            name=f"{name} (eval)",
            path=path,
            fmt=fmt,
            events=[],
            skipped_lines=0,
        )
        run.side_runs = [side, *side.side_runs]
        return run
    cols = _Columns(table)
    wall = wall_clock(cols, table)
    steps, own = step_axis(cols)
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


__all__ = ["TIME_KEYS", "assemble", "step_axis", "wall_clock"]
