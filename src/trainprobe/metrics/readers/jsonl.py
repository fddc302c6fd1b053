"""JSON Lines: one object per line (W&B ``wandb-history.jsonl``, custom loggers); nested objects flatten
with ``/``, and an object of statistics of one value (``{"num": 32, "mean": 3.48, "std": 0.89}``) is its mean.

Speed: a line whose values are all numbers becomes a template (its keys and punctuation are the literal
pieces, as for text lines: :mod:`trainprobe.metrics.readers.text.template`), and chunks of lines of that shape
are read in bulk; other lines go through ``json.loads``. A line ``json`` cannot read (a 5,000-digit number,
nesting deeper than the interpreter allows, a cut line) is skipped and counted, never an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainprobe.metrics.axis import finish_run
from trainprobe.metrics.coverage import Coverage
from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.readers.json_values import WALL_KEYS, Row, flatten
from trainprobe.metrics.readers.text.chunks import LineChunks
from trainprobe.metrics.readers.text.parser import LineParser
from trainprobe.metrics.readers.text.template import Template
from trainprobe.metrics.table import ColumnBuilder, RunLog, Unread

_JNUM = re.compile(rb"-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|NaN|-?Infinity")
_PAIR = re.compile(rb'\s*"((?:[^"\\]|\\.){1,256})"\s*:\s*')
_SAMPLES = 12


def parse_object(line: bytes) -> dict[str, Any] | None:
    """One JSON object, or None for anything else (including what ``json`` refuses)."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError, MemoryError):
        return None
    return obj if isinstance(obj, dict) else None


def learn_json_template(line: bytes) -> Template | None:
    """A template for a flat object of numbers (``{"step": 0, "loss": 2.7, "lr": 3e-4}``)."""
    body = line.strip()
    if not (body.startswith(b"{") and body.endswith(b"}")) or len(body) > 1 << 14:
        return None
    pos = 1
    pieces: list[bytes] = []
    keys: list[str | None] = []
    start_piece = 0
    while pos < len(body) - 1:
        m = _PAIR.match(body, pos)
        if m is None:
            return None
        v = _JNUM.match(body, m.end())
        if v is None:
            return None
        try:
            keys.append(json.loads(b'"' + m.group(1) + b'"'))
        except ValueError:
            return None
        pieces.append(body[start_piece : v.start()].strip())
        start_piece = pos = v.end()
        while pos < len(body) - 1 and body[pos : pos + 1] in b" \t":
            pos += 1
        if body[pos : pos + 1] == b",":
            pos += 1
        elif pos != len(body) - 1:
            return None
    pieces.append(body[start_piece:].strip())
    if not keys or len(set(keys)) != len(keys):
        return None
    made = Template(tuple(p for p in pieces if p), tuple(keys))
    return made if made.fits_fast_path() else None


def read_json_lines(
    path: Path,
    *,
    name: str,
    fmt: str,
    row_of: Callable[[dict[str, Any]], Row | None] = flatten,
    bulk: bool = True,
) -> RunLog:
    """Rows of a JSON Lines file; ``row_of`` turns an object into a row (None: not a row)."""
    builder = ColumnBuilder()
    template: Template | None = None
    skipped = 0
    unread: list[Unread] = []
    json_rows = 0
    # lines that are no JSON (a text log appended, a launcher's output) are read as text: a run of their own
    text = LineParser(f"{name} (text)", str(path))
    line_no = 0
    chunks = LineChunks(path)
    for chunk in chunks:
        if bulk and template is None:
            first = chunk.lstrip().split(b"\n", 1)[0]
            template = learn_json_template(first)
        if template is not None:
            got = template.read_block(chunk, None)
            if got is not None:
                builder.add_block(template.columns, got[0])
                line_no += got[0].shape[0]
                json_rows += got[0].shape[0]
                continue
        for line in chunk.split(b"\n"):
            line_no += 1
            if not line.strip():
                continue
            obj = parse_object(line)
            row = row_of(obj) if obj is not None else None
            if obj is None:
                text.feed_line(line.decode("utf-8", "replace"))
            if row is None:
                skipped += 1
                if len(unread) < _SAMPLES:
                    why = "not a JSON object" if obj is None else "no numbers in it"
                    unread.append(Unread(line_no, line[:160].decode("utf-8", "replace"), why))
                continue
            builder.add_row(row)
            json_rows += 1
    skipped += chunks.overlong
    for key in WALL_KEYS:
        builder.units.setdefault(key, "s")
    run = finish_run(builder, name=name, path=str(path), fmt=fmt, skipped_lines=skipped)
    run.unread = unread
    return _with_text_part(run, text.run(), json_rows)


def _with_text_part(run: RunLog, text: RunLog, json_rows: int) -> RunLog:
    """``run`` with the rows its file's text lines gave as a run beside it, and its coverage: the JSON
    rows read, and what the text reader made of the rest."""
    seen = text.coverage or Coverage()
    run.coverage = Coverage(
        json_rows + seen.numeric_lines, json_rows + seen.row_lines, seen.unread, seen.missed_lines
    )
    if len(text) and text.metrics:
        text.coverage = None  # said once, on the file's run
        run.side_runs.append(text)
        run.skipped_lines = max(0, run.skipped_lines - seen.row_lines)
    return run


def head_object(head: bytes) -> dict[str, Any] | None:
    first = head.lstrip().split(b"\n", 1)[0].strip()
    if not (first.startswith(b"{") and first.endswith(b"}")):
        return None
    return parse_object(first)


class JsonlReader:
    name = "jsonl"

    def sniff(self, path: Path, head: bytes) -> bool:
        return head_object(head) is not None

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        return [read_json_lines(path, name=path.stem, fmt="jsonl")]


__all__ = [
    "WALL_KEYS",
    "JsonlReader",
    "Row",
    "head_object",
    "learn_json_template",
    "parse_object",
    "read_json_lines",
]
