"""Rows of a table that are a stream of their own beside its main rows, each read on an axis of its own
(:func:`trainprobe.metrics.axis.assemble` makes them side runs): an eval loop counted apart from the train
loop, and records logged once an epoch beside records counted within it.
"""

from __future__ import annotations

import numpy as np

from trainprobe.metrics.roles import metric_kind
from trainprobe.metrics.splits import EVAL, is_epoch_key, is_step_key, split_of
from trainprobe.metrics.step_axis import COUNTER_KEY, Columns
from trainprobe.metrics.table import INTERNAL, Table


def eval_stream(table: Table) -> np.ndarray | None:
    """Rows of an eval stream with an axis of its own, or None. mmengine counts its val loop in epochs
    beside the train loop's iterations: ``Epoch(val) [3][7/7]`` beside ``Epoch(train) [3][10/50]``, or
    ``step`` 1, 2, 3 on the val rows of ``scalars.json`` between train rows at ``step`` 50, 100, 150. Such
    rows become a run of their own (``<name> (eval)``) on their own axis; eval rows that fit the train axis
    stay where they are."""
    cols = Columns(table)
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


# counters within an epoch that no step name marks (PaddlePaddle's ``batch_id``, ``epoch: 0, batch: 100``)
_INNER_COUNTERS = frozenset({"batch", "batch_id", "batch_idx", "step_id", "iter_id"})


def epoch_stream(table: Table) -> tuple[np.ndarray, str] | None:
    """Rows logged once an epoch beside rows counted within it: (those rows, the epoch key), or None.

    A record counted within an epoch (``Epoch [1/5], Step [10/62]``, ``epoch_id: 0, batch_id: 100``) is
    read on the fine axis; the records without the fine counter that hold metrics (``Validation mel loss:
    0.48`` after an epoch's last step, ``epoch_id: 0, dev_cost: 0.47``, ``epoch: 0, train loss: 80.8, test
    loss: 15.7``) are a few per epoch, and their step is the epoch they close: the epoch of the row, or of
    the last row before it. Such rows become a run of their own on the epoch axis (``<name> (epoch)``)."""
    cols = Columns(table)
    user = [k for k in cols.cols if not k.startswith(INTERNAL)]
    epochs = [k for k in user if is_epoch_key(k)]
    fine = [k for k in user if is_step_key(k) or k.lower() in _INNER_COUNTERS]
    if COUNTER_KEY in cols.cols:
        fine.append(COUNTER_KEY)
    if not epochs or not fine:
        return None
    epoch = max(epochs, key=lambda k: int(np.count_nonzero(cols.have[k])))
    inner = max(fine, key=lambda k: int(np.count_nonzero(cols.have[k])))
    if not _starts_over_each_epoch(cols, inner, epoch):
        return None  # a global counter (``iter: 300/30000``) places every row, once-an-epoch ones too
    has_fine = np.zeros(cols.n, dtype=bool)
    for k in fine:
        has_fine |= cols.have[k]
    has_metric = np.zeros(cols.n, dtype=bool)
    for k in user:
        if k not in fine and k not in epochs and metric_kind(k) not in ("time", "counter"):
            has_metric |= cols.have[k]
    placed = np.maximum.accumulate(np.where(cols.have[epoch], np.arange(cols.n), -1)) >= 0
    coarse = ~has_fine & has_metric & placed
    count = int(np.count_nonzero(coarse))
    if count < 2 or np.count_nonzero(has_fine & has_metric) < 2 * count:
        return None
    epoch_values = cols.cols[epoch][cols.have[epoch]]
    # a few rows an epoch at most: an eval every N steps is on the fine axis, not an epoch's summary
    if count > 4 * max(1, int(np.unique(epoch_values).size)):
        return None
    return coarse, epoch


def _starts_over_each_epoch(cols: Columns, inner: str, epoch: str) -> bool:
    """Whether ``inner`` goes back to its start as ``epoch`` moves on (most of the times it goes back)."""
    rows = np.flatnonzero(cols.have[inner])
    values = cols.cols[inner][rows]
    drops = np.flatnonzero(np.diff(values) < 0)
    if not drops.size:
        return False
    have = cols.have[epoch]
    idx = np.maximum.accumulate(np.where(have, np.arange(cols.n), 0))
    at = cols.cols[epoch][idx][rows]
    moved = np.count_nonzero(at[drops + 1] > at[drops])
    return bool(moved >= 0.8 * drops.size)


__all__ = ["epoch_stream", "eval_stream"]
