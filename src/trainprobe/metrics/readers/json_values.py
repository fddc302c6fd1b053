"""The numbers of one JSON record as named values: nested objects as ``a/b/c`` names, a summary object of
one value (``{num, mean, std}``) as its mean, a timestamp string as seconds. Shared by every JSON-shaped
reader (JSONL, W&B, detectron2, mmengine, trainer_state, a tagged JSON record inside a text line)."""

from __future__ import annotations

import math
from typing import Any

WALL_KEYS = ("_timestamp", "timestamp", "time", "wall_time", "walltime")
_MAX_DEPTH = 8

Row = dict[str, float]


def flatten(obj: dict[str, Any], prefix: str = "", depth: int = 0) -> Row:
    """Numbers of a JSON object as ``a/b/c`` keys (booleans count; strings only as timestamps)."""
    out: Row = {}
    if depth > _MAX_DEPTH:
        return out
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, (int, float)):
            try:
                out[name] = float(value)
            except OverflowError:  # an integer too big for a float
                out[name] = math.copysign(math.inf, value)
        elif isinstance(value, dict):
            summary = _summary_mean(value)
            if summary is not None:
                out[name] = summary
            else:
                out.update(flatten(value, name + "/", depth + 1))
        elif isinstance(value, str) and name in WALL_KEYS:
            # here, not at the top: the text package imports this module (its tagged JSON records)
            from trainprobe.metrics.readers.text.clock import match_stamp

            stamp = match_stamp(value.strip())
            if stamp is not None and stamp.seconds is not None:
                out[name] = stamp.seconds
    return out


# the keys of an object that summarises one value over a tick (StyleGAN's training_stats: {"num": 32,
# "mean": 3.48, "std": 0.89}): its mean is the value, under the name of the value it summarises
_SUMMARY_KEYS = frozenset({"num", "n", "count", "mean", "std", "min", "max", "sum", "var"})


def _summary_mean(value: dict[str, Any]) -> float | None:
    """The mean of a summary object of numbers (``mean`` and other statistics only), or None."""
    if "mean" not in value or len(value) < 2 or not set(value) <= _SUMMARY_KEYS:
        return None
    mean = value["mean"]
    if isinstance(mean, bool) or not isinstance(mean, (int, float)):
        return None
    return float(mean)


__all__ = ["WALL_KEYS", "Row", "flatten"]
