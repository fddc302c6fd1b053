"""JSON Lines: one object per line (W&B ``wandb-history.jsonl``, custom loggers); nested objects flatten
with ``/``.

Speed: lines shaped like the first one (same keys in the same order, numbers only) are parsed by one regex per
multi-megabyte chunk; others go through ``json.loads``.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from trainprobe.metrics.readers._fastnum import split_uniform
from trainprobe.metrics.readers.text import iter_line_chunks, ts_value
from trainprobe.metrics.table import ColumnBuilder, RunLog, finish_run

_JNUM = r"(-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|NaN|-?Infinity|null)"
_PAIR = re.compile(r'\s*"((?:[^"\\]|\\.)*)"\s*:\s*(-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|NaN|-?Infinity)\s*')
_WALL_KEYS = ("_timestamp", "timestamp", "time", "wall_time", "walltime")


def _template(line: str) -> tuple[re.Pattern[str], tuple[str, ...], list[str]] | None:
    body = line.strip()
    if not (body.startswith("{") and body.endswith("}")):
        return None
    inner = body[1:-1]
    keys: list[str] = []
    parts: list[str] = [r"^\s*\{"]
    for i, piece in enumerate(inner.split(",")):
        m = _PAIR.fullmatch(piece)
        if m is None:
            return None
        keys.append(json.loads('"' + m.group(1) + '"'))
        parts.append(("," if i else "") + r'\s*"' + re.escape(m.group(1)) + r'"\s*:\s*' + _JNUM + r"\s*")
    parts.append(r"\}[ \t\r]*$")
    pattern = re.compile("".join(parts), re.M)
    m = pattern.match(line)
    if m is None:
        return None
    bounds = [0] + [x for i in range(1, len(keys) + 1) for x in m.span(i)] + [len(line)]
    pieces = [line[bounds[i] : bounds[i + 1]] for i in range(0, len(bounds), 2)]
    return pattern, tuple(keys), pieces


def _flatten(obj: dict[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, (bool, int, float)):
            out[name] = float(value)
        elif isinstance(value, dict):
            out.update(_flatten(value, name + "/"))
        elif isinstance(value, str) and name in _WALL_KEYS:
            with contextlib.suppress(ValueError):
                out[name] = ts_value("iso", value)
    return out


def _to_float(cells: list[tuple[str, ...]], n_keys: int) -> np.ndarray:
    if not cells:
        return np.empty((0, n_keys))
    flat = "\n".join(" ".join(row) for row in cells)
    if "null" in flat or "Infinity" in flat or "NaN" in flat:
        flat = flat.replace("null", "nan").replace("Infinity", "inf").replace("NaN", "nan")
    values = np.array(flat.split(), dtype=np.float64)
    return values.reshape(len(cells), n_keys)


def read_jsonl(path: Path, *, name: str) -> RunLog:
    builder = ColumnBuilder()
    template: tuple[re.Pattern[str], tuple[str, ...], list[str]] | None = None
    skipped = 0
    for chunk in iter_line_chunks(path):
        if template is None:
            template = _template(chunk.lstrip().split("\n", 1)[0])
        if template is not None:
            pattern, keys, pieces = template
            block = split_uniform(chunk, pieces, len(keys)) if "null" not in chunk else None
            if block is not None:
                builder.add_block(keys, block)
                continue
            rows = pattern.findall(chunk)
            if len(rows) == chunk.count("\n") + 1:
                builder.add_block(keys, _to_float(rows, len(keys)))
                continue
        for line in chunk.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                skipped += 1
                continue
            if isinstance(obj, dict):
                builder.add_row(_flatten(obj))
            else:
                skipped += 1
    for key in _WALL_KEYS:
        builder.units.setdefault(key, "s")
    return finish_run(builder, name=name, path=str(path), fmt="jsonl", skipped_lines=skipped)


class JsonlReader:
    name = "jsonl"

    def sniff(self, path: Path, head: bytes) -> bool:
        first = head.lstrip().split(b"\n", 1)[0].strip()
        if not (first.startswith(b"{") and first.endswith(b"}")):
            return False
        try:
            return isinstance(json.loads(first), dict)
        except ValueError:
            return False

    def read(self, path: Path, *, event_patterns: list[re.Pattern[str]] | None = None) -> list[RunLog]:
        return [read_jsonl(path, name=path.stem)]
