"""A record printed as a table of two cells a line, one key and its value (OpenAI baselines' and Stable
Baselines' loggers, Spinning Up's, any ``| name | value |`` dump between dashed rules)::

    ---------------------------------
    | rollout/           |          |
    |    ep_rew_mean     | -1.2e+03 |
    | time/              |          |
    |    total_timesteps | 2048     |
    ---------------------------------

Each line alone names no value (its key and its number are in different cells), so the field reader sees
unnamed numbers; read together, the lines of one table are one row. A line whose value cell is empty is a
section: the keys under it are named by it (``rollout/ep_rew_mean``). The record ends at a line that is no
table line (the closing rule), or where a key comes back (a table printed right under the last).
"""

from __future__ import annotations

import math
import re

from trainprobe.metrics.readers.text.tokens import to_float

_VALUE = re.compile(r"(?i)[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|[-+]?(?:nan|inf)")
_MAX_KEY = 80
# fewer values than this is no record (a lone ``| lr | 0.1 |`` in a how-to)
_MIN_VALUES = 2


class KeyValueTable:
    """The table record being read; ``read`` each line that starts with ``|``, ``flush`` at the end."""

    def __init__(self) -> None:
        self._values: dict[str, float] = {}
        self._order = -1
        self._last = -2
        self._wall = math.nan
        self._section = ""

    def read(self, body: str, order: int, wall: float) -> list[tuple[dict[str, float], int, float]] | None:
        """None when ``body`` is no line of such a table; else the records it ended (a list, often empty)."""
        cells = _two_cells(body)
        if cells is None or not _is_key(cells[0]):
            return None
        key, cell = cells
        if cell and _VALUE.fullmatch(cell) is None:
            return None
        done: list[tuple[dict[str, float], int, float]] = []
        name = key if not cell else self._name(key)
        if order != self._last + 1 or name in self._values:
            done = self.flush()
            self._order, self._wall = order, wall
        self._last = order
        if not cell:
            self._section = key if key.endswith("/") else key + "/"
        else:
            self._values[name] = to_float(cell)
        return done

    def _name(self, key: str) -> str:
        return self._section + key if self._section else key

    def flush(self) -> list[tuple[dict[str, float], int, float]]:
        """The record read so far (when it holds enough values), and a fresh start."""
        values, self._values, self._section, self._last = self._values, {}, "", -2
        return [(values, self._order, self._wall)] if len(values) >= _MIN_VALUES else []


def _two_cells(body: str) -> tuple[str, str] | None:
    """The two cells of ``| key | value |`` (stripped), or None. A split, not a regex: a long line of spaces
    between bars costs one pass (a lazy pattern around ``\\s*`` would try every way to share them out)."""
    parts = body.strip().split("|")
    if len(parts) != 4 or parts[0] or parts[3]:
        return None
    return parts[1].strip(), parts[2].strip()


def _is_key(cell: str) -> bool:
    """A cell that names something: a letter in it, and no number standing alone at its end (``| epoch 001 |
    loss 5.5 |`` is a line of fields, not a key and its value)."""
    words = cell.split()
    return (
        0 < len(cell) <= _MAX_KEY
        and any(c.isalpha() for c in cell)
        and _VALUE.fullmatch(words[-1].lstrip(":=")) is None
    )


__all__ = ["KeyValueTable"]
