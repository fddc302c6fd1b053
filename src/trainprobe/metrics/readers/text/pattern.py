"""A line read with the user's ``--pattern`` (named groups: ``step`` and each metric), not the tokenizer."""

from __future__ import annotations

import re

from trainprobe.metrics.readers.text.tokens import to_float


def pattern_row(match: re.Match[str]) -> dict[str, float]:
    """The numbers of a match's named groups (a group that matched nothing or no number gives none)."""
    row: dict[str, float] = {}
    for key, value in match.groupdict().items():
        if value is None:
            continue
        try:
            row[key] = to_float(value.strip())
        except (ValueError, OverflowError):
            continue
    return row


__all__ = ["pattern_row"]
