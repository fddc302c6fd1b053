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
        lines = head.decode("utf-8", errors="replace").splitlines()
        if len(lines) < 2:
            return False
        first = lines[0]
        delimiter = "\t" if first.count("\t") > first.count(",") else ","
        cells = first.split(delimiter)
        if len(cells) < 2 or any(_cell(c) is not None for c in cells):
            return False
        return lines[1].count(delimiter) == first.count(delimiter)

    def read(self, path: Path, *, event_patterns: list[re.Pattern[str]] | None = None) -> list[RunLog]:
        return read_csv(path, name=path.parent.name if path.name == "metrics.csv" else path.stem)
