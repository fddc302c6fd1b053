"""Tables in text logs: a header line of names, then lines of values under it, paired by position.

Ultralytics prints its training as ``Epoch GPU_mem box_loss cls_loss …`` then ``1/60 0G 0.6509 0.932 …``,
and its validation as ``Class Images Instances Box(P R mAP50 mAP50-95): 100% ━━ 2/2`` then
``all 24 24 0.5 0.4 0.3 0.2``; fixed-width console tables elsewhere look the same. A header is a line of three
or more names and no numbers (a progress tail after a ``:`` is cut off); a row is a line of as many cells as
the header has names, mostly numbers (a cell may be a word, such as a class name, and is then no field), read
within a few lines of its header or of the table's last row. A cell ``N/M`` is a counter, ``0G`` a number
with its unit. Cells are separated by whitespace, or by commas in a line that has two or more.
"""

from __future__ import annotations

import re

from trainprobe.metrics.readers.text.tokens import UNITS, to_float
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


def pair_row(names: list[str], body: str) -> dict[str, float] | None:
    """Values of a row under a header (``TOTAL_PREFIX`` keys for counters' totals), or None."""
    cells, _tail = _cells(body)
    if len(cells) != len(names):
        return None
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


__all__ = ["HEADER_REACH", "header_names", "pair_row"]
