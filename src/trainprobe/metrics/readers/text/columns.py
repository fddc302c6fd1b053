"""Tables in text logs: a header line of names, then lines of values under it, paired by position.

Ultralytics prints its training as ``Epoch GPU_mem box_loss cls_loss …`` then ``1/60 0G 0.6509 0.932 …``,
and its validation as ``Class Images Instances Box(P R mAP50 mAP50-95): 100% ━━ 2/2`` then
``all 24 24 0.5 0.4 0.3 0.2``; fixed-width console tables elsewhere look the same. A header is a line of three
or more names and no numbers (a progress tail after a ``:`` is cut off); a row is a line of as many cells as
the header has names, mostly numbers (a cell may be a word, such as a class name, and is then no field), read
within a few lines of its header or of the table's last row. A cell ``N/M`` is a counter, ``0G`` a number
with its unit. Cells are separated by whitespace, or by commas in a line that has two or more.

A header may take two lines, its names read downwards (Vowpal Wabbit's ``average  since  example …`` over
``loss  last  counter …``: ``average loss``, ``since last``, ``example counter``): a header line right under
another of as many names. A row may end in one tag cell past the header's names: a tag that names a held-out
split (``h``, vw's holdout rows; ``val``, ``test`` …) makes the row's fields eval fields.
"""

from __future__ import annotations

import re

from trainprobe.metrics.readers.text.tokens import UNITS, to_float
from trainprobe.metrics.splits import EVAL, EVAL_PREFIX, EVAL_WORDS, is_epoch_key, is_step_key, split_of
from trainprobe.metrics.table import TOTAL_PREFIX

_NAME = re.compile(r"[A-Za-z_][\w\-./@]*")
_CELL_NUMBER = re.compile(r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)([A-Za-z%]{0,3})")
_COUNTER = re.compile(r"(\d+)/(\d+)")
_PROSE_WORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "to",
        "of",
        "in",
        "on",
        "at",
        "is",
        "are",
        "was",
        "and",
        "or",
        "for",
        "with",
        "by",
        "as",
    }
)
HEADER_REACH = 6  # a row further below its header than this many lines is not read by it


def _cells(body: str) -> tuple[list[str], str]:
    """Whitespace-separated cells before a progress tail (``64: 8% ━━ 1/12 2.6it/s``), and the tail; or the
    cells of a comma-separated line (a CSV table below lines that are not its own: metadata, a banner)."""
    if body.count(",") >= 2:
        return [c.strip() for c in body.split(",")], ""
    out: list[str] = []
    parts = body.split()
    for i, cell in enumerate(parts):
        if cell.endswith(":"):
            if cell[:-1]:
                out.append(cell[:-1])
            return out, " ".join(parts[i + 1 :])
        out.append(cell)
    return out, ""


def header_names(body: str) -> list[str] | None:
    """The names of a header line, or None when the line is not one."""
    cells, tail = _cells(body)
    if (tail and "%" not in tail) or "=" in body or not 3 <= len(cells) <= 40:
        return None
    names: list[str] = []
    for cell in cells:
        if cell.endswith((".", ",", ";")) or cell.lower() in _PROSE_WORDS or "/" in cell:
            return None  # a sentence or a path, not a row of names
        cell = cell.strip("()")
        if "(" in cell:  # ``Box(P``: a group name before the first of its columns
            cell = cell.split("(", 1)[1]
        if not _NAME.fullmatch(cell):
            return None
        names.append(cell)
    return names if len(names) >= 3 else None


def stack_header(upper: list[str] | None, lower: list[str]) -> list[str]:
    """The names of a header ``lower`` whose line comes right under the header line ``upper`` (None: none
    does): the two read downwards when they have as many names and differ, else ``lower``'s own."""
    if upper is None or len(upper) != len(lower) or upper == lower:
        return lower
    return [f"{a} {b}" for a, b in zip(upper, lower, strict=True)]


#: Row tags past a table's last column that say the row is measured on held-out data (vw's ``h``).
_EVAL_TAGS = EVAL_WORDS | {"h", "holdout"}


def pair_row(names: list[str], body: str) -> dict[str, float] | None:
    """Values of a row under a header (``TOTAL_PREFIX`` keys for counters' totals; an eval-tagged row's
    fields but its step and epoch under ``EVAL_PREFIX``), or None."""
    cells, _tail = _cells(body)
    if len(cells) == len(names) + 1 and cells[-1].lower() in _EVAL_TAGS:
        row = _pair_cells(names, cells[:-1])
        return None if row is None else {_eval_name(key): value for key, value in row.items()}
    return _pair_cells(names, cells) if len(cells) == len(names) else None


def _eval_name(key: str) -> str:
    name = key.removeprefix(TOTAL_PREFIX)
    if is_step_key(name) or is_epoch_key(name) or split_of(name) == EVAL:
        return key
    return key[: len(key) - len(name)] + EVAL_PREFIX + name


def _pair_cells(names: list[str], cells: list[str]) -> dict[str, float] | None:
    row: dict[str, float] = {}
    numbers = 0
    for name, cell in zip(names, cells, strict=True):
        counter = _COUNTER.fullmatch(cell)
        if counter:
            row[name] = float(counter.group(1))
            row[TOTAL_PREFIX + name] = float(counter.group(2))
            numbers += 1
            continue
        m = _CELL_NUMBER.fullmatch(cell)
        if m and (not m.group(2) or m.group(2) in UNITS):
            row[name] = to_float(m.group(1))
            numbers += 1
    return row if numbers >= max(2, len(names) - 1) else None


class ColumnTables:
    """Where a log's header tables stand, line by line: the last header's names and the line its table
    reaches from (the header, then its last row), and the header before it, so that a line of prose that
    reads as names (vw's "your features have too much magnitude" between two rows) does not end a table."""

    def __init__(self) -> None:
        self._header: tuple[list[str], int] | None = None
        self._earlier: tuple[list[str], int] | None = None
        self._header_line = -2  # where the last header line is: a header right under it stacks on it

    def see_line(self, body: str, order: int) -> None:
        """Take the line at ``order`` as a header when it is one."""
        if (names := header_names(body)) is None:
            return
        upper = self._header[0] if self._header is not None and self._header_line == order - 1 else None
        if upper is None:
            self._earlier = self._header
        self._header, self._header_line = (stack_header(upper, names), order), order

    def row(self, body: str, order: int) -> dict[str, float] | None:
        """The line's values under the last header within reach, or under the one before it (which becomes
        the last again); None when it is no row of either."""
        for table in (self._header, self._earlier):
            if table is None or order - table[1] > HEADER_REACH:
                continue
            if (row := pair_row(table[0], body)) is not None:
                self._header = (table[0], order)  # a table's reach: from its last row
                return row
        return None


__all__ = ["HEADER_REACH", "ColumnTables", "header_names", "pair_row", "stack_header"]
