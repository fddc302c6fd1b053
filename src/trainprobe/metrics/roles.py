"""What a column is: a metric the detectors watch, a counter, or a timing.

- **metric**: losses, accuracies, learning rates, norms, and any other series that moves;
- **counter**: bookkeeping that only counts up or never changes: the epoch, ``consumed samples``,
  ``micro_step``, ``number of skipped iterations: 0``, ``global batch size``, a constant setting printed on
  every line (``Batch Size: 2``, ``ppo_ep: 1``), a running maximum (``MaxMemAllocated``), memory in use
  (``mem 8974MB``, ``mem allocated avg``), a count of things (``num_classes``), a device id, the running
  statistics of a normaliser of the inputs (``stats_o/mean``);
- **timing**: how long things took or how fast they went (``elapsed time per iteration (ms)``, ``step_avg``,
  ``data_time``, a bare ``data`` (the loader's wait), ``eta_seconds``, ``samples_per_second``, ``train_wall``,
  fields with a time unit, the fields of a ``time (ms) | …`` line): the slowdown detector reads them, the
  others do not.

Counters and timings stay in the run (``RunLog.columns``) but are not reported as metrics, so a counter
that moves on is never a "spike" and a timer's first ``nan`` is never a NaN loss. Learning rates, losses,
accuracies and norms are metrics even when constant.
"""

from __future__ import annotations

import re

import numpy as np

from trainprobe.metrics.splits import is_epoch_key

METRIC = "metric"
COUNTER = "counter"
TIMING = "timing"

_LOSS = re.compile(r"(?i)loss|^trl$|^tel$|ppl|perplexity|nll|xent|entropy")
_ACC = re.compile(
    r"(?i)acc|accuracy|\bf1\b|bleu|rouge|exact_match|top1|top-1|top5|auc|\bmap\b|map50|\bap\b|/ap|iou|dice|"
    r"precision|recall|reward|score"
)
_LR = re.compile(r"(?i)(^|[\s/_])lr($|[\s/_])|learning.?rate")
_NORM = re.compile(r"(?i)norm")
_TIME = re.compile(
    r"(?i)time|_ms$|\(ms\)|step_avg|throughput|per_sec|per.?second|persec|/s$|/sec$|tokens_per|samples_per|"
    r"mfu|tflops|dt$|latency|runtime|wall|^eta|duration|^dur$|elapsed|it/s|speed|"
    # a column named just ``data`` is the data loader's wait, as in CycleGAN's ``time: 0.092, data: 0.154``
    # (the name alone decides: a quantity of data would carry a unit or a noun, ``data_size``)
    r"^data$|data.?load"
)
_STEP_TIME = re.compile(
    r"(?i)time per iteration|step_time|iter_time|time_per_step|^dt$|batch_time|iteration-time"
)
_COUNTER = re.compile(
    r"(?i)consumed|samples$|tokens$|num[\s_\-]?zeros|number of|batch.?size|^bsz$|^wpb$|^bs$|epoch|"
    r"micro_?step|ep(?:isode)?.?len|^batch(?:_?id|_?idx)?$|^(?:step|iter)_?id$|skipped|loss.?scale|^ntokens$|^nsentences$|^sample_size$|num_input_tokens|total_flos|"
    r"params|parameters|seq(?:uence)?.?len|instances$|images$|^imgsz$|^size$|^gpu_mem|"
    # resources and settings, not how training goes: memory in use, a count of classes or layers, a device id
    r"(?:^|[\s_/])mem(?:ory)?(?:$|[\s_/])|max_?mem|mem_?(?:allocated|reserved)|^num[\s_\-]|^device$|"
    # one example's target and size, and the weight of the examples seen (vw's ``current label``,
    # ``current features``, ``example weight``): what went in, not how training goes
    r"(?:^|[\s_])(?:label|features)$|example.?weight"
)
# The running statistics of what goes in, not of how training goes: a normaliser's mean and deviation of the
# observations or goals (baselines' ``stats_o/mean``, ``stats_g/std``; VecNormalize's ``obs_rms``).
_INPUT_STATS = re.compile(
    r"(?i)(?:^|/)stats_\w+/(?:mean|std|var)$|(?:^|[/_])(?:obs?|ret)_?rms(?:$|[/_])|normali[sz]er"
)
_SPLIT_PREFIX = re.compile(r"(?i)^(?:eval/|train/|(?:train|valid|val|eval|test)_)")
_TIME_UNITS = frozenset(
    {"ms", "s", "sec", "secs", "us", "µs", "ns", "min", "h", "hr", "ms/step", "s/step", "ms/it"}
)


def metric_kind(name: str) -> str:
    """loss (lower is better), accuracy (higher is better), lr, norm, time, counter, or other."""
    if _LR.search(name):
        return "lr"
    if re.search(r"(?i)loss.?scale", name) or _INPUT_STATS.search(name):
        return "counter"
    if _TIME.search(name):
        return "time"
    if _LOSS.search(name):
        return "loss"
    if _ACC.search(name):
        return "accuracy"
    if _NORM.search(name):
        return "norm"
    if _COUNTER.search(name):
        return "counter"
    return "other"


def is_step_time(name: str) -> bool:
    return bool(_STEP_TIME.search(name))


def role_of(name: str, values: np.ndarray, unit: str = "") -> str:
    """The role of a column from its name, unit and (finite, logged) values."""
    name = _SPLIT_PREFIX.sub("", name)
    if is_epoch_key(name):
        return COUNTER
    kind = metric_kind(name)
    if kind == "time" or unit in _TIME_UNITS:
        return TIMING
    if kind == "counter":
        return COUNTER
    finite = values[np.isfinite(values)]
    if finite.size >= 3 and kind != "loss" and bool(np.all(finite == finite[0])):
        return COUNTER  # a setting printed on every line (a loss that never moves is worth a look)
    if finite.size == 1 and kind != "loss":
        return COUNTER  # one value (an engine's first ``lr=[0.0001]`` before it crashed) is no series
    if kind in ("loss", "accuracy", "lr", "norm"):
        return METRIC
    if finite.size >= 3:
        d = np.diff(finite)
        integral = bool(np.all(finite == np.round(finite)))
        if bool(np.all(d >= 0)) and (integral or finite.size >= 10):
            return COUNTER  # counts up: samples seen, a running maximum
    return METRIC


__all__ = ["COUNTER", "METRIC", "TIMING", "is_step_time", "metric_kind", "role_of"]
