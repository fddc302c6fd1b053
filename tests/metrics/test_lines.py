"""Line by line, data-driven: each entry of ``lines/fields.json`` is a log line (the shapes issue 11 lists, as
real loggers and launchers print them) with the fields it must give — column names as the reader names
them, ``"nan"`` for a NaN, a counter's total ``#total:KEY`` only where listed — or ``"row": false`` for a
line that must give no metric row, and whether its prefix holds a usable timestamp. A new shape is a new
entry.

Each line is read twice: by the tokenizer (``LineParser.feed_line``) and through the template the first read
taught (the same line repeated, in one chunk), and both must agree."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trainprobe.metrics.readers.text.fields import read_fields
from trainprobe.metrics.readers.text.parser import LineParser
from trainprobe.metrics.readers.text.prefix import split_prefix
from trainprobe.metrics.readers.text.rows import column_names, why_not_metrics

CASES = json.loads((Path(__file__).parent / "lines" / "fields.json").read_text(encoding="utf-8"))


def _row(line: str) -> tuple[dict[str, float], float | None] | None:
    prefix = split_prefix(line)
    body = line[prefix.body_start :]
    fields = read_fields(body)
    if why_not_metrics(fields, body) is not None:
        return None
    names = column_names(fields)
    wall = prefix.stamp.seconds if prefix.stamp is not None else None
    return {names[k]: v for k, v in fields.values.items()}, wall


def _same(got: float, want: Any) -> bool:
    if want == "nan":
        return math.isnan(got)
    return got == pytest.approx(float(want))


@pytest.mark.parametrize("case", CASES, ids=[c["why"][:60] for c in CASES])
def test_line(case: dict[str, Any]) -> None:
    got = _row(case["line"])
    if case.get("row") is False:
        assert got is None, got
        return
    assert got is not None, why_not_metrics(read_fields(case["line"]), case["line"])
    values, wall = got
    want = case["fields"]
    # totals of N/M counters (``#total:…``) are checked where a case lists them
    values = {k: v for k, v in values.items() if not k.startswith("#total:") or k in want}
    assert set(values) == set(want), values
    for key, value in want.items():
        assert _same(values[key], value), (key, values[key], value)
    for name in case.get("not", []):
        assert name not in values
    if "wall" in case:
        assert (wall is not None) == case["wall"]


@pytest.mark.parametrize("case", [c for c in CASES if c.get("row") is not False], ids=lambda c: c["why"][:60])
def test_template_reads_a_line_as_the_tokenizer_does(case: dict[str, Any], tmp_path: Path) -> None:
    """The line 40 times in one chunk: the first read teaches a template, the rest go through it (or, where
    the line cannot be one, through the tokenizer again): every row is the same."""
    line = case["line"]
    one = LineParser("t", "t")
    one.feed_line(line)
    single = one.run()
    many = LineParser("t", "t")
    many.feed_chunk("\n".join([line] * 40).encode())
    run = many.run()
    assert len(run) == 40 * len(single)
    for key, col in single.columns.items():
        assert key in run.columns
        values = run.columns[key][run.mask(key)]
        assert np.allclose(values, col[single.mask(key)][0], equal_nan=True), key
