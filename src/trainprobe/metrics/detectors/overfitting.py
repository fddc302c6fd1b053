"""Overfitting: an eval loss whose best value is followed by at least three evaluations that rise (most steps
up, the last ≥ 5 % above the best) beyond the series' noise (their median above the best by three times the
robust spread of its second differences: DETR's test losses zigzag around their best and are no overfit,
timm's that rise in even steps are one), while the train loss it pairs with keeps falling over the same steps
(a loss of the train split, or else one the eval split holds under a name that says train, as in
``eval/train loss``), and no eval accuracy (mAP, acc) improved by more than 10 % over them.
"""

from __future__ import annotations

import re

import numpy as np

from trainprobe.conventions import step_text
from trainprobe.metrics.detectors.families import trend_kind
from trainprobe.metrics.detectors.trends import _series, _since_best
from trainprobe.metrics.findings import OVERFITTING, Finding, fmt_value
from trainprobe.metrics.splits import EVAL, EVAL_WORDS, TRAIN, split_of
from trainprobe.metrics.table import RunLog


def _words(name: str) -> list[str]:
    return [
        w for w in re.split(r"[\s/_.\-]+", name.lower()) if w and w not in EVAL_WORDS | {"train", "training"}
    ]


_TRAIN_WORDS = frozenset({"train", "training"})


def _train_named(name: str) -> bool:
    """Whether a metric the eval split holds by its name says it is measured on the training data: a reader
    that prefixes the fields of an eval line puts the epoch's ``train loss`` there (PaddleSpeech's
    ``epoch: 0, train loss: 80.8, test loss: 15.7`` gives ``eval/train loss``), and so do names such as
    ``eval/train_loss``."""
    return bool(_TRAIN_WORDS & set(re.split(r"[\s/_.\-]+", name.lower())))


def _train_partner(run: RunLog, eval_metric: str) -> str | None:
    """The train loss to pair an eval loss with: of the train split, or else one the eval split holds under
    a name that says train (:func:`_train_named`), when that is all the run has."""
    losses = [m for m in run.metrics if trend_kind(m) == "loss"]
    trains = [m for m in losses if split_of(m) == TRAIN] or [m for m in losses if _train_named(m)]
    if not trains:
        return None
    want = _words(eval_metric)
    same = [m for m in trains if _words(m) == want]
    pool = same or trains
    return max(pool, key=lambda m: int(np.count_nonzero(run.mask(m))))


def _eval_accuracy_improved(run: RunLog, loss: str, step_from: float, step_to: float) -> bool:
    """Whether an eval accuracy of the same eval set (``eval_g0_accuracy`` for ``eval_g0_loss``; any, when
    none shares its name) got clearly better between the two steps."""
    accuracies = [m for m in run.metrics if split_of(m) == EVAL and trend_kind(m) == "accuracy"]
    own = set(_words(loss)) - {"loss"}
    same = [m for m in accuracies if own and own <= set(_words(m))]
    for m in same or accuracies:
        _rows, steps, x = _series(run, m)
        before = x[steps <= step_from]
        end = x[(steps > step_from) & (steps <= step_to)]
        if before.size and end.size and end[-1] > 1.1 * before[-1] + 1e-9:
            return True
    return False


def _rise_beyond_noise(x: np.ndarray, best: int, *, k: float = 3.0) -> bool:
    """Whether the evaluations after the best one rose beyond the series' noise: their median above the
    best by ``k`` times the noise around the trend (the robust spread of second differences, so a steady
    rise or fall has none and a series that zigzags around its level has much). With fewer than five
    evaluations after the best the shape decides. A tail that rose at each of its last three evaluations,
    to beyond the noise, is a rise too, however the evaluations between wavered (dev cost 0.40 best,
    0.43, 0.41, then 0.47, 0.52, 0.62)."""
    after = x[best:]
    if after.size < 5:
        return True
    noise = 1.4826 * float(np.median(np.abs(np.diff(x, 2)))) / np.sqrt(6.0)
    if float(np.median(after[1:])) - float(after[0]) > k * noise:
        return True
    climbing = bool(np.all(np.diff(after[-4:]) > 0))
    return climbing and float(after[-1]) - float(after[0]) > k * noise


def detect_overfitting(run: RunLog) -> list[Finding]:
    findings: list[Finding] = []
    for metric in run.metrics:
        if split_of(metric) != EVAL or trend_kind(metric) != "loss" or _train_named(metric):
            continue
        rows, steps, x = _series(run, metric)
        if x.size < 4 or x.min() < 0:
            continue
        best = int(np.argmin(x))
        after = x[best:]
        if after.size < 4 or x[best] <= 0 or after[-1] < 1.05 * x[best] or not _rise_beyond_noise(x, best):
            continue
        if _eval_accuracy_improved(run, metric, float(steps[best]), float(steps[-1])):
            continue  # better on held-out data (mAP 0 → 0.87): an eval loss that rose is no overfit
        ups = np.diff(after) > 0
        if (
            np.count_nonzero(ups) < 0.6 * ups.size
            and np.median(after[-max(2, after.size // 3) :]) < 1.1 * x[best]
        ):
            continue
        partner = _train_partner(run, metric)
        if partner is None:
            continue
        _trows, tsteps, t = _series(run, partner)
        at_best = t[tsteps <= steps[best]]
        later = t[tsteps > steps[best]]
        if not later.size:
            continue
        start = float(at_best[-1]) if at_best.size else float(later[0])
        if not later[-1] < start:
            continue
        text = (
            f"{metric} has risen since its best {fmt_value(float(x[best]))} at step "
            f"{step_text(steps[best])} to {fmt_value(float(x[-1]))}, while {partner} kept falling "
            f"({fmt_value(start)} → {fmt_value(float(later[-1]))}): overfitting"
        )
        findings.append(
            _since_best(OVERFITTING, run, metric, rows, steps, best, float(x[-1]), float(x[best]), text)
        )
    return findings


__all__ = ["detect_overfitting"]
