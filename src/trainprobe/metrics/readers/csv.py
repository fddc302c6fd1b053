"""CSV/TSV with a header row: plain exports, Lightning ``metrics.csv`` (blank cells where a row has no value),
W&B run-history exports (``_step``, ``_timestamp``) and W&B chart exports (``Step``, ``<run> - <metric>``
columns with ``__MIN``/``__MAX`` bands; several runs in one chart become several runs).

Rows are read in batches and each batch becomes a numpy block at once, so memory is the numbers themselves
(8 bytes a cell), never a Python object per cell: a 100 MB CSV stays well under a gigabyte. Framework
layouts that are CSV too (Keras ``CSVLogger``, Ultralytics ``results.csv``, timm ``summary.csv``) are modules
of their own built on :func:`read_table`.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

import numpy as np

from trainprobe.metrics.axis import finish_run
from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.splits import is_step_key
from trainprobe.metrics.table import ABSENT, ColumnBuilder, RunLog

_CHART_COLUMN = re.compile(r"^(?P<run>.+?) - (?P<metric>.+)$")
_BATCH = 1 << 15
_MAX_FIELD = 1 << 16
_MAX_LINE = 1 << 20  # a CSV line (its cells together) longer than this is skipped


def _cell(text: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        low = text.lower()
        if low in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity"):
            return float(low.replace("infinity", "inf"))
        return None


# A header cell is a name: not a number, not a timestamp, no ``key=value`` or log-level prefix. Without this a
# Python ``logging`` line ("2026-11-29 22:36:21,226 INFO step=1 ...") splits at the millisecond comma into
# two "names" and a text log passes for a CSV with no metric columns.
_NOT_A_NAME = re.compile(r"=|\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}:\d{2}")
_SNIFF_LINES = 20
# Lines a CSV writer puts before its header (a run's metadata, a tool's banner) say so by their first
# characters; at most this many are passed over, so a text log with a few ``#`` lines stays a text log.
_COMMENT = ("#", "//", "%", ";")
_MAX_PREAMBLE = 64


def _is_preamble(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith(_COMMENT)


def _delimiter(first_line: str) -> str:
    return "\t" if first_line.count("\t") > first_line.count(",") else ","


def header_of(head: str) -> list[str] | None:
    """The header row of a CSV head (names only, as ``looks_like_csv`` accepts it), else None."""
    all_lines = head.splitlines()
    skip = 0
    while skip < min(len(all_lines), _MAX_PREAMBLE) and _is_preamble(all_lines[skip]):
        skip += 1
    lines = [line for line in all_lines[skip : skip + _SNIFF_LINES + 2] if line.strip()]
    if (len(lines) > 2 and not head.endswith(("\n", "\r"))) or len(lines) > _SNIFF_LINES + 1:
        lines = lines[:-1]
    if len(lines) < 2:
        return None
    try:
        rows = list(csv.reader(lines, delimiter=_delimiter(lines[0])))
    except csv.Error:
        return None
    header, data = [h.strip() for h in rows[0]], rows[1:]
    if len(header) < 2 or any(_cell(h) is not None or _NOT_A_NAME.search(h) for h in header):
        return None
    if any(len(row) != len(header) for row in data):
        return None
    # Some column must hold numbers (blank cells allowed: Lightning leaves them where a row has no value).
    numeric = any(
        all(_cell(row[j]) is not None or not row[j].strip() for row in data)
        and any(_cell(row[j]) is not None for row in data)
        for j in range(len(header))
    )
    return header if numeric else None


def looks_like_csv(head: str) -> bool:
    """True for a header row of names followed by rows with the same number of cells, some column numeric.

    At most the first 20 rows are judged; a last line without its newline may be cut short, so it is left out
    when there are others. A blank header cell is allowed (the index column of a pandas export).
    """
    return header_of(head) is not None


def _bounded_lines(fh: TextIO) -> Iterator[str]:
    """The file's lines, a line longer than ``_MAX_LINE`` characters skipped while it is read (not held:
    a 1.5 GB cell costs a read, not 3 GB of memory; a cell that long is no number)."""
    while True:
        line = fh.readline(_MAX_LINE)
        if not line:
            return
        if len(line) >= _MAX_LINE and not line.endswith("\n"):
            while True:  # the rest of the overlong line, in bounded pieces
                more = fh.readline(_MAX_LINE)
                if not more or more.endswith("\n"):
                    break
            continue
        yield line


def _batches(path: Path) -> tuple[list[str], Iterator[np.ndarray]]:
    """The header and the data as (rows, columns) float blocks, ``ABSENT`` in blank or non-numeric cells."""
    fh = open(path, encoding="utf-8", errors="replace", newline="")  # noqa: SIM115 - closed by the generator
    first = fh.readline(_MAX_FIELD)
    for _ in range(_MAX_PREAMBLE):
        if not first or not _is_preamble(first):
            break
        first = fh.readline(_MAX_FIELD)
    header = [h.strip() for h in next(csv.reader([first], delimiter=_delimiter(first)), [])]
    reader = csv.reader(_bounded_lines(fh), delimiter=_delimiter(first))
    n_cols = len(header)

    def blocks() -> Iterator[np.ndarray]:
        try:
            csv.field_size_limit(_MAX_FIELD)
            batch: list[list[str]] = []
            while True:
                try:
                    row = next(reader, None)
                except csv.Error:
                    continue  # a field too long or a broken quote: that row is skipped
                if row is not None and row:
                    batch.append(row)
                if batch and (row is None or len(batch) >= _BATCH):
                    block = np.full((len(batch), n_cols), ABSENT)
                    for i, cells in enumerate(batch):
                        for j, text in enumerate(cells[:n_cols]):
                            value = _cell(text)
                            if value is not None:
                                block[i, j] = value
                    yield block
                    batch = []
                if row is None:
                    return
        finally:
            fh.close()

    return header, blocks()


def read_table(
    path: Path,
    *,
    name: str,
    fmt: str,
    rename: Callable[[str], str] | None = None,
) -> list[RunLog]:
    """Every run in a CSV file (one, or one per run of a W&B chart export)."""
    header, blocks = _batches(path)
    if rename is not None:
        header = [rename(h) for h in header]
    parts = list(blocks)
    n_cols = len(header)
    table = np.concatenate(parts) if parts else np.empty((0, n_cols))
    del parts
    have = ~(table.view(np.uint64) == np.uint64(0x7FF8DEADBEEF0001))
    keep = [
        j
        for j in range(n_cols)
        if have[:, j].any() and header[j] and not header[j].endswith(("__MIN", "__MAX"))
    ]
    step_cols = [j for j in keep if is_step_key(header[j])]
    charts: dict[str, list[int]] = {}
    for j in keep:
        m = _CHART_COLUMN.match(header[j])
        if m and j not in step_cols:
            charts.setdefault(m.group("run"), []).append(j)
    if charts and sum(len(v) for v in charts.values()) == len(keep) - len(step_cols):
        groups = {
            run: [(j, _CHART_COLUMN.match(header[j]).group("metric")) for j in cols]  # type: ignore[union-attr]
            for run, cols in charts.items()
        }
        fmt = "wandb-chart"
    else:
        groups = {name: [(j, header[j]) for j in keep if j not in step_cols]}
    runs: list[RunLog] = []
    for run_name, cols in groups.items():
        builder = ColumnBuilder()
        builder.units["_timestamp"] = "s"
        chosen = step_cols[:1] + [j for j, _ in cols]
        keys = tuple([header[j] for j in step_cols[:1]] + [metric for _, metric in cols])
        rows = have[:, [j for j, _ in cols]].any(axis=1) if cols else np.ones(table.shape[0], dtype=bool)
        builder.add_block(keys, table[rows][:, chosen])
        runs.append(finish_run(builder, name=run_name, path=str(path), fmt=fmt))
    return runs


def csv_header(path: Path, head: bytes) -> list[str] | None:
    return header_of(head.decode("utf-8", errors="replace"))


class CsvReader:
    name = "csv"

    def sniff(self, path: Path, head: bytes) -> bool:
        return csv_header(path, head) is not None

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        if path.name == "metrics.csv":
            return read_table(path, name=path.parent.name, fmt="lightning")
        fmt = "wandb-history" if "_step" in (csv_header(path, _head(path)) or []) else "csv"
        return read_table(path, name=path.stem, fmt=fmt)


def _head(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(4096)


__all__ = ["CsvReader", "csv_header", "header_of", "looks_like_csv", "read_table"]
