"""How much of a log was understood: the lines that carried numbers, the lines that became metric rows, and
the shapes of the numeric lines that were not read, so a log read only in part says so instead of passing
for a healthy one.

A shape is a line's message with every number masked (``step # | loss # | lr #``), counted in a bounded
table: memory stays flat however long the log, and a line costs one regex pass only when it was not read.
Not every numeric line that was not read is a metric the reader missed: an argument dump, a model summary,
a table of system info or pasted source are numeric lines too. What sets a missed metric record apart is
that its shape *repeats* with values that *vary*, and that those values are measurements — at least one
non-integer number (``0.4213``, ``1.2e-4``), in values that are new on a good share of its lines — where a
shape listing, a NCCL channel table or a parameter count holds integers only, and a config or model summary
printed again at each restart repeats the same few values. The log is "partly read" when such lines
outnumber the lines read as rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# A number by itself: digits inside a name (``layers.3.mlp``, ``config_a0``, ``python3.8``) are part of the
# shape, so a listing of named entries is as many one-off shapes, not one repeating shape.
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# A measurement: a number with a fractional part standing by itself (``0.4213``, ``1.2e-4``, ``13.3it/s``),
# not part of a name, a path or a version (``python3.8/``, ``v1.2.3``, ``10.0.0.1``).
_DECIMAL = re.compile(r"(?<![\w./\\])[-+]?(?:\d*\.\d+|\d+\.)(?:[eE][-+]?\d+)?(?![\d./\\])")
_MAX_SHAPES = 512
_SHAPE_CHARS = 160
_SHOWN = 5
# A shape seen fewer times than this is a one-off (a banner, a summary line), however many numbers it holds.
MIN_REPEATS = 10
# Of a shape's lines, the share with distinct values (one with a non-integer, at least three) that makes them
# measurements; this many distinct ones always do.
_DISTINCT_SHARE = 0.25
_DISTINCT_ENOUGH = 64


@dataclass
class UnreadShape:
    """One shape of numeric lines that gave no metric row: how many lines, the first one (with its line
    number), and whether its numbers changed from line to line and held a fraction."""

    shape: str
    lines: int
    example: str
    line_no: int
    varies: bool = False
    measured: bool = False
    _first_numbers: tuple[str, ...] = ()
    # the distinct sets of numbers of the lines that hold a non-integer, up to _DISTINCT_ENOUGH of them
    _measured_values: set[tuple[str, ...]] = field(default_factory=set)

    @property
    def looks_like_metrics(self) -> bool:
        # measurements take ever new values; a config or model summary printed again at each of five starts
        # repeats the same few (``- 0.999``, ``BatchNorm2d(32, eps=0.001, momentum=0.03)``)
        distinct = self.measured or len(self._measured_values) >= max(3, _DISTINCT_SHARE * self.lines)
        return self.lines >= MIN_REPEATS and self.varies and distinct

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "lines": self.lines,
            "example": self.example,
            "line": self.line_no,
            "looks_like_metrics": self.looks_like_metrics,
        }


@dataclass
class Coverage:
    """What a reader understood of one file (``numeric_lines`` counts every line with a digit, read or not;
    ``row_lines`` those that became metric rows or part of one; ``unread`` the most frequent shapes of the
    rest; ``missed_lines`` the lines of every shape that looks like metrics, shown or not)."""

    numeric_lines: int = 0
    row_lines: int = 0
    unread: list[UnreadShape] = field(default_factory=list)
    missed_lines: int = 0

    @property
    def partly_read(self) -> str | None:
        """Why the log counts as read only in part (what was missed outweighs what was read), or None."""
        if self.missed_lines == 0 or self.missed_lines <= self.row_lines:
            return None
        top = next((s for s in self.unread if s.looks_like_metrics), None)
        example = f" (e.g. line {top.line_no}: {top.example[:100]!r})" if top is not None else ""
        return (
            f"{self.missed_lines} numeric lines of repeating shapes were not read, against "
            f"{self.row_lines} read as metric rows{example}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "numeric_lines": self.numeric_lines,
            "row_lines": self.row_lines,
            "missed_lines": self.missed_lines,
            "unread_shapes": [s.to_json() for s in self.unread],
            "partly_read": self.partly_read,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Coverage:
        shapes = [
            UnreadShape(
                str(s["shape"]),
                int(s["lines"]),
                str(s["example"]),
                int(s["line"]),
                varies=bool(s["looks_like_metrics"]),
                measured=bool(s["looks_like_metrics"]),
            )
            for s in data.get("unread_shapes", [])
        ]
        return cls(int(data["numeric_lines"]), int(data["row_lines"]), shapes, int(data["missed_lines"]))


class ShapeCounter:
    """Counts the numeric lines a reader did not turn into rows, by shape, in bounded memory."""

    def __init__(self) -> None:
        self.numeric_lines = 0
        self.row_lines = 0
        self._shapes: dict[str, UnreadShape] = {}

    def read(self, lines: int) -> None:
        """``lines`` lines that became metric rows (or part of one)."""
        self.numeric_lines += lines
        self.row_lines += lines

    def unread(self, text: str, line_no: int) -> None:
        """A line with a digit that gave no row (``line_no`` counts from 1)."""
        self.numeric_lines += 1
        message = text.strip()
        numbers = tuple(_NUMBER.findall(message))
        shape = _NUMBER.sub("#", message)[:_SHAPE_CHARS]
        got = self._shapes.get(shape)
        if got is None:
            if len(self._shapes) >= _MAX_SHAPES:  # a log of ever new shapes: the first ones stand for it
                return
            self._shapes[shape] = UnreadShape(
                shape, 1, message[:_SHAPE_CHARS], line_no, _first_numbers=numbers
            )
            return
        got.lines += 1
        if not got.varies and numbers != got._first_numbers:
            got.varies = True
        seen = got._measured_values
        if got.varies and not got.measured and numbers not in seen and _is_measured(message):
            seen.add(numbers)
            got.measured = len(seen) >= _DISTINCT_ENOUGH

    def coverage(self) -> Coverage:
        ranked = sorted(self._shapes.values(), key=lambda s: (-s.looks_like_metrics, -s.lines))
        missed = sum(s.lines for s in ranked if s.looks_like_metrics)
        return Coverage(self.numeric_lines, self.row_lines, ranked[:_SHOWN], missed)


def _is_measured(message: str) -> bool:
    """Whether ``message`` holds a non-integer value (``32768.0`` is an integer written as a float)."""
    for m in _DECIMAL.finditer(message):
        try:
            value = float(m.group())
        except ValueError:
            continue
        if not value.is_integer():
            return True
    return False


def has_digit(text: str) -> bool:
    return any(c.isdigit() for c in text)


__all__ = ["MIN_REPEATS", "Coverage", "ShapeCounter", "UnreadShape", "has_digit"]
