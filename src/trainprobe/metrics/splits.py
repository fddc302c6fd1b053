"""Which split a metric belongs to (train or eval), and what a column name says about steps and epochs.

One place decides it for every reader and detector: a column is eval when its name says so (``val_loss``,
``eval/loss``, ``valid ppl``, ``test_acc``, ``Validation loss``, llm.c's ``tel``), and a text reader names the
fields of an eval line (``Test set: Average loss: 0.03``, ``Epoch(val) [1] …``) with an ``eval/`` prefix so
train and eval series never share a column.
"""

from __future__ import annotations

import re

TRAIN = "train"
EVAL = "eval"
EVAL_PREFIX = "eval/"

_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_EVAL_ABBREVIATIONS = frozenset({"tel", "vl", "vloss", "valloss", "vacc"})
EVAL_WORDS = frozenset(
    {
        "val",
        "valid",
        "validation",
        "validating",
        "eval",
        "evaluation",
        "evaluating",
        "test",
        "testing",
        "dev",
        "heldout",
    }
)
STEP_NAMES = frozenset(
    {
        "step",
        "_step",
        "steps",
        "global_step",
        "globalstep",
        "global step",
        "iter",
        "iters",
        "iteration",
        "it",
        "s",
        "optimizer_step",
        "train/global_step",
        "trainer/global_step",
        "num_updates",
        "update",
        "updates",
    }
)
_STEP_LAST_WORDS = frozenset(
    {"step", "iter", "iteration", "global_step", "counter"}
)  # vw: ``example counter``
_EPOCH_WORDS = frozenset({"epoch", "ep"})
_GROUP = re.compile(r"\s*\([^()]*\)\s*$")
_SPLIT_WORD_PREFIX = re.compile(r"(?i)^(?:train|training|valid|val|eval|test)[_/]")


def split_of(column: str) -> str:
    """``train`` or ``eval``. Ultralytics' ``metrics/…`` (mAP, precision, recall) are computed on the
    validation set, and so is any average precision (``mAP50``, ``bbox/AP``): eval too."""
    if column.lower() in _EVAL_ABBREVIATIONS or column.startswith("metrics/"):
        return EVAL
    words = _WORDS.findall(column)
    if "AP" in words:  # detection's average precision (mAP50, bbox/AP) is measured on held-out images
        return EVAL
    return EVAL if any(w.lower() in EVAL_WORDS for w in words) else TRAIN


def base_name(key: str) -> str:
    """A key without a trailing ``(…)`` group, a split prefix or case: ``Epoch(train)`` → ``epoch``,
    ``valid_num_updates`` → ``num_updates``."""
    return _SPLIT_WORD_PREFIX.sub("", _GROUP.sub("", key).strip()).lower()


def is_step_key(key: str) -> bool:
    low = base_name(key)
    if low in STEP_NAMES:
        return True
    words = re.split(r"[\s/]+", low)
    # ``train step``, ``global iteration``; not a rate (``elapsed time per iteration``, ``tokens per step``)
    return (
        len(words) > 1
        and words[-1] in _STEP_LAST_WORDS
        and words[0] not in ("time", "samples", "tokens")
        and "per" not in words
    )


def is_epoch_key(key: str) -> bool:
    words = re.split(r"[\s/_]+", base_name(key))
    if len(words) > 1 and words[-1] in ("id", "idx"):  # ``epoch_id``: the epoch's index (PaddlePaddle)
        words = words[:-1]
    return bool(words) and words[-1] in _EPOCH_WORDS and (len(words) == 1 or words[0] != "num")


__all__ = [
    "EVAL",
    "EVAL_PREFIX",
    "EVAL_WORDS",
    "STEP_NAMES",
    "TRAIN",
    "base_name",
    "is_epoch_key",
    "is_step_key",
    "split_of",
]
