"""What a line's fields make: a metric row or the reason it is none, the column each field goes to (its
split prefix) and its unit. Pure functions of :class:`~.fields.Fields`; :mod:`.parser` calls them per line.
"""

from __future__ import annotations

import re

from trainprobe.metrics.readers.text.fields import COUNTER_KEY, Fields
from trainprobe.metrics.roles import metric_kind
from trainprobe.metrics.splits import EVAL, EVAL_PREFIX, EVAL_WORDS, is_epoch_key, is_step_key, split_of

_PROSE_SHARE = 0.2
#: the start of the reason a lone field is no row (a record's next line may still hold it)
ONE_FIELD = "one field"
_UNNAMED = "numbers"
_TIME_UNITS = frozenset({"ms", "s", "sec", "secs", "us", "min", "h"})
_WORD_SPLIT = re.compile(r"[\s_\-/()]+")
# labels that say the line is part of a configuration dump (Marian's ``[config] beam-size: 6``, ``args:``,
# ``hparams:``): settings, never a metric row nor a record's next line, however many numbers it holds
_CONFIG_LABELS = frozenset(
    {"config", "configs", "configuration", "args", "arguments", "hparams", "hyperparameters", "options"}
)


# What a line needs to be anything but prose: a digit (a value, a step), or a word of a NaN report, a save,
# an epoch line, an eval banner or a failure (trainprobe.metrics.events, splits.EVAL_WORDS); a superset,
# checked first.
MAY_MATTER_WORDS = (
    *(b"nan", b"inf", b"sav", b"wrot", b"writ", b"stor", b"dump", b"export", b"checkpoint", b"ckpt"),
    *(b"persist", b"epoch", b"val", b"test", b"dev", b"heldout"),
    *(b"memory", b"traceback", b"kill", b"abort", b"timeout", b"timed out", b"terminate", b"fault"),
    *(b"exitcode", b"childfailed"),
)
_MAY_MATTER = re.compile(rb"[0-9]|" + b"|".join(re.escape(w) for w in MAY_MATTER_WORDS))


def may_matter(raw: bytes) -> bool:
    return _MAY_MATTER.search(raw.lower()) is not None


def why_not_metrics(fields: Fields, body: str) -> str | None:
    """None for a metric row; else why the message is not one."""
    values = {k: v for k, v in fields.values.items() if not k.startswith("#") or k == COUNTER_KEY}
    if any(label.strip().lower() in _CONFIG_LABELS for label in fields.labels):
        return f"a configuration line (labelled {fields.labels[0]!r}): settings, not metrics"
    if not values:
        if not any(c.isdigit() for c in body):
            return "no numbers"
        return f"{_UNNAMED}: no key names them"
    total = fields.field_chars + fields.prose_chars
    if fields.prose_chars > _PROSE_SHARE * total:
        words = " ".join(fields.prose_words[:6])
        return f"mostly prose, not fields (words that name no value: {words})"
    if len(values) < 2 and not any(is_step_key(k) or is_epoch_key(k) or k == COUNTER_KEY for k in values):
        key = next(iter(values))
        return f"{ONE_FIELD} ({key}) and no step: a setting, or part of a record"
    return None


def units_of(fields: Fields) -> dict[str, str]:
    """Units of the fields. Every field of a timing line is a time: a line labelled ``time (ms)`` or
    ``timers`` (Megatron's ``time (ms) | forward-compute: …``), or one where most fields carry a time unit
    (``|E2E latency=3.88s |… |Others=0.22 (5.94%)|``)."""
    units = dict(fields.units)
    keys = [k for k in fields.values if not k.startswith("#")]
    label_words = {w.lower() for label in fields.labels for w in _WORD_SPLIT.split(label)}
    timed = [k for k in keys if units.get(k) in _TIME_UNITS]
    if label_words & {"time", "timers", "timing", "timings"} or (keys and 2 * len(timed) >= len(keys)):
        unit = "ms" if "ms" in label_words else "s"
        for k in keys:
            if metric_kind(k) in ("other", "time"):  # a loss beside two timers is still a loss
                units.setdefault(k, unit)
    return units


def is_eval_banner(fields: Fields) -> bool:
    """A short line that announces an evaluation (``***** Evaluating perplexity, Epoch 1/16 *****``): the
    fields on the next line are eval fields."""
    words = [w.lower() for w in [*fields.prose_words, *(x for label in fields.labels for x in label.split())]]
    return 0 < len(words) <= 8 and any(w.strip(".:,") in EVAL_WORDS for w in words)


def column_names(fields: Fields, *, eval_context: bool = False) -> dict[str, str]:
    """Column name of each field. The fields of an eval line (labelled ``Test set:``, ``Epoch(val)``,
    ``| valid |``, led by ``Validation``, with a step key ``validation loss at iteration``, or right under
    an ``Evaluating …`` banner) get an ``eval/`` prefix, those of a line labelled ``train`` a ``train/`` one,
    unless their own name says a split."""
    words = {w.lower() for label in fields.labels for w in _WORD_SPLIT.split(label)}
    context = {
        w.lower() for k in fields.values if is_step_key(k) or is_epoch_key(k) for w in _WORD_SPLIT.split(k)
    }
    if eval_context or (words | context) & EVAL_WORDS:
        prefix = EVAL_PREFIX
    elif words & {"train", "training"}:
        prefix = "train/"
    else:
        prefix = ""
    names: dict[str, str] = {}
    for key in fields.values:
        plain = key.startswith("#") or is_step_key(key) or is_epoch_key(key) or split_of(key) == EVAL
        if prefix == "train/" and key.lower().startswith(("train", "tr_")):
            plain = True
        names[key] = key if plain or not prefix else prefix + key
    return names


__all__ = [
    "MAY_MATTER_WORDS", "ONE_FIELD", "column_names", "is_eval_banner", "may_matter", "units_of",
    "why_not_metrics",
]  # fmt: skip
