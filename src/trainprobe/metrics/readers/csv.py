"""CSV/TSV with a header row: plain exports, Lightning ``metrics.csv`` (blank cells where a row has no value),
W&B run-history exports (``_step``, ``_timestamp``) and W&B chart exports (``Step``, ``<run> - <metric>``
columns with ``__MIN``/``__MAX`` bands; several runs in one chart become several runs)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np

from trainprobe.metrics.table import ABSENT, ColumnBuilder, RunLog, finish_run, is_step_key

_CHART_COLUMN = re.compile(r"^(?P<run>.+?) - (?P<metric>.+)$")


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


def looks_like_csv(head: str) -> bool:
    """True for a header row of names followed by rows with the same number of cells, some column numeric.

    At most the first 20 rows are judged; a last line without its newline may be cut short, so it is left out
    when there are others. A blank header cell is allowed (the index column of a pandas export).
    """
    lines = [line for line in head.splitlines()[: _SNIFF_LINES + 2] if line.strip()]
    if (len(lines) > 2 and not head.endswith(("\n", "\r"))) or len(lines) > _SNIFF_LINES + 1:
        lines = lines[:-1]
    if len(lines) < 2:
        return False
    first = lines[0]
    delimiter = "\t" if first.count("\t") > first.count(",") else ","
    try:
        rows = list(csv.reader(lines, delimiter=delimiter))
    except csv.Error:
        return False
    header, data = rows[0], rows[1:]
    if len(header) < 2 or any(_cell(h) is not None or _NOT_A_NAME.search(h) for h in header):
        return False
    if any(len(row) != len(header) for row in data):
        return False
    # Some column must hold numbers (blank cells allowed: Lightning leaves them where a row has no value).
    return any(
        all(_cell(row[j]) is not None or not row[j].strip() for row in data)
        and any(_cell(row[j]) is not None for row in data)
        for j in range(len(header))
    )


def read_csv(path: Path, *, name: str) -> list[RunLog]:
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        head = fh.read(4096)
        fh.seek(0)
        delimiter = "\t" if head.split("\n", 1)[0].count("\t") > head.split("\n", 1)[0].count(",") else ","
        reader = csv.reader(fh, delimiter=delimiter)
        header = [h.strip() for h in next(reader)]
        rows = [[_cell(c) for c in row] for row in reader if row]
    n_cols = len(header)
    table = np.full((len(rows), n_cols), np.nan)
    have = np.zeros((len(rows), n_cols), dtype=bool)
    for i, row in enumerate(rows):
        for j, v in enumerate(row[:n_cols]):
            if v is not None:
                table[i, j] = v
                have[i, j] = True
    keep = [j for j in range(n_cols) if have[:, j].any() and not header[j].endswith(("__MIN", "__MAX"))]
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
        fmt = "lightning" if path.name == "metrics.csv" else "wandb-history" if "_step" in header else "csv"
    runs: list[RunLog] = []
    for run_name, cols in groups.items():
        builder = ColumnBuilder()
        builder.units["_timestamp"] = "s"
        chosen = step_cols[:1] + [j for j, _ in cols]
        keys = tuple([header[j] for j in step_cols[:1]] + [metric for _, metric in cols])
        mask = (
            have[:, chosen].any(axis=1)
            if len(chosen) > len(step_cols[:1])
            else np.ones(len(rows), dtype=bool)
        )
        block = np.where(have[:, chosen], table[:, chosen], ABSENT)[mask]
        builder.add_block(keys, block)
        runs.append(finish_run(builder, name=run_name, path=str(path), fmt=fmt))
    return runs


class CsvReader:
    name = "csv"

    def sniff(self, path: Path, head: bytes) -> bool:
        return looks_like_csv(head.decode("utf-8", errors="replace"))

    def read(self, path: Path, *, event_patterns: list[re.Pattern[str]] | None = None) -> list[RunLog]:
        return read_csv(path, name=path.parent.name if path.name == "metrics.csv" else path.stem)
