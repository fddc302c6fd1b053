"""The step axis of a run, from the columns a reader collected (the order of preference is in
:mod:`trainprobe.metrics.axis`): a step-like key, a counter, an epoch key, else the row number.

:class:`Columns` is the working set both this module and :mod:`.axis` consume: each takes the columns it turns
into the axis or the clock out of it.
"""

from __future__ import annotations

import re

import numpy as np

from trainprobe.metrics.axis_trust import counts_up, crowded_steps, starts_over, uncounted_rows
from trainprobe.metrics.roles import metric_kind
from trainprobe.metrics.splits import base_name, is_epoch_key, is_step_key
from trainprobe.metrics.table import INTERNAL, TOTAL_PREFIX, RunLog, Table, is_absent

COUNTER_KEY = "#counter"
# a name that says its column counts something the run goes through
_COUNTER_NAME = re.compile(r"(?i)(?:^|[^a-z])(?:steps?|iters?|iterations?|updates?|frames?)(?:[^a-z]|$)")
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


# an axis key needs this many rows in a run of at least _STRAY_ROWS rows
_MIN_AXIS_ROWS = 3
_STRAY_ROWS = 10


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


class Columns:
    """A table's columns with, per key, the rows that have a value; what is popped is consumed."""

    def __init__(self, table: Table) -> None:
        self.cols = table.columns
        self.have = {k: ~is_absent(v) for k, v in self.cols.items()}
        self.n = len(table)
        self.declared_end: float | None = None
        # the step axis chosen, and why (RunLog.step_key, RunLog.step_why)
        self.axis: str | None = None
        self.axis_why = ""

    def pop(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        return self.cols.pop(key), self.have.pop(key)


def _two_counter(
    outer: np.ndarray, outer_have: np.ndarray, inner: np.ndarray, inner_have: np.ndarray, total: float | None
) -> np.ndarray | None:
    """``(epoch - origin) × period + counter`` when the counter starts over as the epoch moves on (origin: the
    first epoch logged, 0 or 1; 1 for a log that starts later)."""
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
    period = total if total is not None and total > 0 else _period(c, drops, moved)
    if period <= 0:
        return None
    # Epochs count from the first one logged when it is 0 or 1; in a log that starts later (a rotated or cut
    # log, ``tail`` of a running one) from 0 when they are fractions (the HF Trainer's epoch is the steps
    # done over the steps per epoch), else from 1, as most numberings do: a line's step does not depend on
    # where the file begins.
    fractional = bool(np.any(outer[outer_have] != np.floor(outer[outer_have])))
    origin = min(np.floor(float(ep[both[0]])), 0.0 if fractional else 1.0)
    counter = _ffill(inner, inner_have)
    # An eval row after an epoch's last batch sits at that epoch's end.
    return np.asarray((np.floor(ep) - origin) * period + counter)


def _period(c: np.ndarray, drops: np.ndarray, moved: np.ndarray) -> float:
    """An epoch's length in the counter's units, with no total given: where a counter logged every ``d``
    starts each epoch at the remainder (CycleGAN's ``iters`` 1400, then 48 in the next epoch of 1452
    images), ``last + d - first`` at each epoch boundary; else the largest value seen."""
    largest = float(np.max(c))
    ups = np.diff(c)
    ups = ups[ups > 0]
    at = drops[moved[drops - 1]]
    if not ups.size or not at.size:
        return largest
    every = float(np.median(ups))
    lengths = c[at - 1] + every - c[at]
    guess = float(np.median(lengths))
    if guess < largest or not bool(np.all(np.abs(lengths - guess) <= 0.01 * guess)):
        return largest
    return guess


def _signatures(cols: Columns, rows: np.ndarray) -> np.ndarray:
    """A number per row that says which columns it has (its line shape)."""
    sig = np.zeros(rows.size, dtype=np.uint64)
    for j, have in enumerate(list(cols.have.values())[:63]):
        sig |= have[rows].astype(np.uint64) << np.uint64(j)
    return sig


def _dominant_stream(cols: Columns, values: np.ndarray, have: np.ndarray) -> np.ndarray:
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


def _total_of(cols: Columns, key: str, *, constant: bool = False) -> float | None:
    """The ``M`` of a key's ``N/M`` (with ``constant``: only when every line says the same)."""
    name = TOTAL_PREFIX + key
    if name not in cols.cols:
        return None
    values = cols.cols[name][cols.have[name]]
    if not values.size or (constant and not bool(np.all(values == values[0]))):
        return None
    return float(np.median(values))


def _completed(cols: Columns, key: str) -> bool:
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


def _regular_stride(values: np.ndarray, above: float) -> bool:
    """Counts up on every row by about the same stride, to beyond ``above``: a count of units that go
    by several per row (Spinning Up's ``TotalEnvInteracts`` 2999, 5999, … beside ``Epoch`` 1, 2, …)."""
    d = np.diff(values)
    if not d.size or not bool(np.all(d > 0)) or float(values.max()) <= above:
        return False
    stride = float(np.median(d))
    return stride > 1 and bool(np.count_nonzero(np.abs(d - stride) <= 0.5 * stride) >= 0.9 * d.size)


def counter_by_evidence(
    cols: Columns, *, named: bool = True, finer_than: int = 0, coarse_max: float | None = None
) -> str | None:
    """A column no step name marks but whose values show it counts: whole numbers counting up on most
    rows, more distinct ones than ``finer_than`` — or as many, when the coarse counter (largest value
    ``coarse_max``) moves by one a row and this one by a steady stride of several. ``named``: only a name
    that says it counts (``current_steps``, ``env_step``, ``n_iter``, ``frames``); else any (Marian's ``Up.``
    beside ``Ep.``). Among such, the finest (the most distinct values; then the smallest: updates before
    sentences seen). Two such by stride alone (HER's ``test/episode`` and ``train/episode`` beside ``epoch``)
    leave the unit open: none of them, and the epoch the log names stays the axis."""
    best: tuple[int, float, str] | None = None
    by_stride = 0
    for key, have in cols.have.items():
        if key.startswith(INTERNAL) or is_epoch_key(key) or (named and not _COUNTER_NAME.search(key)):
            continue
        if not named and metric_kind(key) in ("time", "loss", "accuracy", "lr"):
            continue  # a clock in whole seconds counts up too, and so may a score: neither is a step
        if np.count_nonzero(have) < max(3, cols.n // 2):
            continue
        values = cols.cols[key][have]
        if not counts_up(values):
            continue
        distinct = int(np.unique(values).size)
        rank = (distinct, -float(values.max()), key)
        stride = coarse_max is not None and distinct == finer_than and _regular_stride(values, coarse_max)
        by_stride += stride
        if (distinct > finer_than or stride) and (best is None or rank[:2] > best[:2]):
            best = rank
    if best is None or (best[0] == finer_than and by_stride > 1):
        return None
    return best[2]


def _filled_by_other_keys(
    cols: Columns, values: np.ndarray, have: np.ndarray, others: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Further step-like keys (e.g. "validation loss at iteration") fill the rows the first left empty, where
    they fit between the steps around them: (the steps, the rows that have one)."""
    if not others or have.all():  # (only then: these are a few columns' worth of memory)
        return values, have
    filled, got = values.copy(), have.copy()
    before = _ffill(values, have, -np.inf)
    after = -_ffill(-values[::-1], have[::-1], -np.inf)[::-1]
    for other in others:
        extra = cols.cols[other]
        fill = ~got & cols.have[other] & (extra >= before) & (extra <= after)
        filled[fill] = extra[fill]
        got |= fill
    return filled, got


def step_axis(cols: Columns, forced: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(steps, rows that had a step of their own); consumes the step, counter and total columns.
    ``forced`` (``--step KEY``): that column is the axis, when the run has it."""
    if forced is not None and forced in cols.cols:
        values, have = cols.pop(forced)
        cols.axis, cols.axis_why = forced, f"--step {forced}"
        _drop_totals(cols)
        return _ffill(values, have), have
    n = cols.n
    # a step or epoch key on one or two rows of many is a setting (``save_epoch: 1`` in an argument dump),
    # not what the records count by; the epoch key on the most rows is the epoch
    keys = sorted(
        (k for k in cols.cols if n < _STRAY_ROWS or np.count_nonzero(cols.have[k]) >= _MIN_AXIS_ROWS),
        key=lambda k: -int(np.count_nonzero(cols.have[k])) if is_epoch_key(k) else 0,
    )
    step_keys = [k for k in keys if not k.startswith(INTERNAL) and is_step_key(k)]
    if not step_keys:
        found = counter_by_evidence(cols)
        epochs = [k for k in keys if is_epoch_key(k) and not k.startswith(INTERNAL)]
        if found is None and epochs and COUNTER_KEY not in cols.cols:
            epoch_values = cols.cols[epochs[0]][cols.have[epochs[0]]]
            coarse = int(np.unique(epoch_values).size)
            top = float(np.max(epoch_values)) if epoch_values.size else 0.0
            found = counter_by_evidence(cols, named=False, finer_than=coarse, coarse_max=top)
        if found is not None:
            step_keys = [found]
            cols.axis_why = f"{found}: counts up in whole numbers on most rows, finer than any epoch"
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
    cols.axis = primary if primary is not None else epoch
    if not cols.axis_why:
        cols.axis_why = _why(primary, epoch, step_keys, counters)
    if primary is not None:
        values, have = cols.cols[primary], cols.have[primary]
        if epoch is not None:
            steps = _two_counter(cols.cols[epoch], cols.have[epoch], values, have, _total_of(cols, primary))
        if steps is None:
            have = _dominant_stream(cols, values, have)
            filled, got = _filled_by_other_keys(cols, values, have, step_keys[1:])
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
        # rows before the first epoch logged belong to the one before it: none (0) in a whole log, the epoch
        # the file's first lines were cut from in a rotated or cut one (``Epoch 4/20`` is its first)
        before = max(float(values[np.argmax(have)]) - 1.0, 0.0) if have.any() else 0.0
        steps = _ffill(values, have, before)
        own = have.copy()
        cols.declared_end = _total_of(cols, epoch, constant=True)
    if steps is None:
        steps = np.arange(n, dtype=np.float64)
        own = np.ones(n, dtype=bool)
    for k in counters:
        if k in cols.cols and k.startswith(INTERNAL):
            cols.pop(k)
    _drop_totals(cols)
    return steps, own


def interleaved_writers(steps: np.ndarray, own: np.ndarray) -> int:
    """How many writers appended to one file at once (ranks or workers logging the same steps), judged
    from the steps: going back often (at least 3 times and on 5 % of the rows) by about as much as they
    go forward is interleaving, not a resume (which goes back far, and seldom) nor restarts (which go back
    to where the run began). 1: one writer."""
    s = steps[own]
    if s.size < 8:
        return 1
    d = np.diff(s)
    back, fwd = -d[d < 0], d[d > 0]
    if back.size < 3 or back.size < 0.05 * d.size or not fwd.size:
        return 1
    if float(np.median(back)) > 10 * float(np.median(fwd)):
        return 1
    # restarts land where the run began (a new start logs its first step again); writers interleaving land
    # anywhere
    landed = s[1:][d < 0]
    if np.count_nonzero(landed <= s.min()) >= 0.5 * landed.size:
        return 1
    _, per_step = np.unique(s, return_counts=True)
    return max(2, int(np.median(per_step)))


def no_step_found(run: RunLog) -> str | None:
    """Why a log is read only in part because its step axis cannot be trusted (:mod:`.axis_trust`): its rows
    stand at their row numbers although a column counts up (whole numbers, or passes that start over), or
    the axis found piles a metric's values on a few steps, or falls back to its start again and again. A
    log with no counter at all (a few appended evaluations) is read by position, and its step axis says so.
    Rows handed over by a caller are in an order of their own."""
    if run.format == "rows" or len(run) < 3 or not run.metrics:
        return None
    if run.step_key is not None:
        return crowded_steps(run) or starts_over(run)
    return uncounted_rows(run)


def _drop_totals(cols: Columns) -> None:
    for k in [k for k in cols.cols if k.startswith(TOTAL_PREFIX)]:
        cols.pop(k)


def _why(primary: str | None, epoch: str | None, step_keys: list[str], counters: list[str]) -> str:
    if primary is None:
        return (
            f"{epoch}: no finer counter in the records" if epoch is not None else "the row number: no counter"
        )
    what = "a progress counter" if primary == COUNTER_KEY or primary in counters else "the step key"
    more = f" (before {', '.join(step_keys[1:3])})" if len(step_keys) > 1 else ""
    within = f", within {epoch}" if epoch is not None else ""
    return f"{what} on the most rows{more}{within}"


__all__ = [
    "COUNTER_KEY",
    "Columns",
    "counter_by_evidence",
    "interleaved_writers",
    "no_step_found",
    "step_axis",
]
