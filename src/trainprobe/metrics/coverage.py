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
come to a twentieth of the lines read as rows: a record kind left unread is often the rarer one (an eval
line every few train lines), so it need not outnumber the rows to leave series out. A progress bar's own
figures (``100%``, ``2/2``, ``13.3it/s``) are no measurement; the values of its postfix are. A line kept
for its counter alone (``3/20  0.0455  0.0300``) whose measurements went unnamed was read only in part, and
counts among the lines not read.
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
# A progress bar's own figures (``100%``, ``2/2``, ``13.3it/s``, ``0.2s``, ``[00:01<00:00]``): how far a loop
# has gone and how fast, never a metric the reader missed; a bar's ``loss=0.23`` postfix still is one.
_BAR = re.compile(r"[━█▏▎▍▌▋▊▉#]{3,}|\d%\|")
_BAR_FIGURES = re.compile(
    r"\d+(?:\.\d+)?%|\d+/\d+|[\d.]+\s*(?:it|s|ex|samples|tok|batch)/(?:s|it)|\[[\d:<,. ]*\]"
    r"|(?<![\w.])[\d.]+s\b"
)
_MAX_SHAPES = 512
_SHAPE_CHARS = 160
_SHOWN = 5
# A shape seen fewer times than this is a one-off (a banner, a summary line), however many numbers it holds.
MIN_REPEATS = 10
# Of a shape's lines, the share with distinct values (one with a non-integer, at least three) that makes them
# measurements; this many distinct ones always do.
_DISTINCT_SHARE = 0.25
_DISTINCT_ENOUGH = 64
# Missed lines against the lines read as rows that make a log partly read. A record kind the reader did not
# understand is often the rarer one (an eval line every few train lines, a summary each epoch), far fewer
# lines than the rows read: the eval lines of the tuned logs, made unreadable, came to 8% of the rows and
# more, where the most a log read right leaves unread is 2% (a score line each epoch).
MISSED_SHARE = 0.05


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
        """Why the log counts as read only in part (what was missed comes to ``MISSED_SHARE`` of what was
        read as rows), or None."""
        if self.missed_lines == 0 or self.missed_lines <= MISSED_SHARE * self.row_lines:
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
        self._count(text.strip(), line_no)

    def unnamed(self, text: str, line_no: int, numbers: list[str]) -> None:
        """A line kept for its counter alone (counted in ``read``) whose other ``numbers`` went unnamed: when
        one is a measurement, the line was read only in part, and its shape counts as a line not read."""
        if _is_measured(" ".join(numbers)):
            self._count(text.strip(), line_no)

    def _count(self, message: str, line_no: int) -> None:
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
        if got.varies and not got.measured and numbers not in seen and _is_measured(_without_bar(message)):
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


def _without_bar(message: str) -> str:
    return _BAR_FIGURES.sub(" ", message) if _BAR.search(message) else message


def has_digit(text: str) -> bool:
    return any(c.isdigit() for c in text)


__all__ = ["MIN_REPEATS", "MISSED_SHARE", "Coverage", "ShapeCounter", "UnreadShape", "has_digit"]
