"""Data-driven reader + detector tests: each ``cases/<name>.expected.json`` names what ``analyze`` must find
in the input beside it (``cases/<name>.<ext>`` or the folder ``cases/<name>/``). A new case is a new file
pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainprobe.metrics import analyze

CASES = Path(__file__).parent / "cases"
EXPECTED = sorted(CASES.glob("*.expected.json"))


def _input_for(expected: Path) -> Path:
    stem = expected.name.removesuffix(".expected.json")
    found = [
        p
        for p in CASES.iterdir()
        if p != expected
        and (p.name == stem or p.name.startswith(stem + "."))
        and not p.name.endswith(".expected.json")
    ]
    assert len(found) == 1, f"{expected.name}: want exactly one input named {stem}[.*], found {found}"
    return found[0]


@pytest.mark.parametrize(
    "expected_path", EXPECTED, ids=[p.name.removesuffix(".expected.json") for p in EXPECTED]
)
def test_case(expected_path: Path) -> None:
    expected = json.loads(expected_path.read_text())
    report = analyze(_input_for(expected_path))
    assert {r.format for r in report.runs} == {expected["format"]}
    if "runs" in expected:
        assert [r.name for r in report.runs] == expected["runs"]
    got = sorted((f.kind, f.metric, int(f.step), f.severity) for f in report.findings)
    want = sorted((k, m, s, sev) for k, m, s, sev in expected["findings"])
    assert got == want, "\n".join(f.message for f in report.findings)
    if "events" in expected:
        events = {(e.kind, int(e.step)) for evs in report.events.values() for e in evs}
        assert {(k, s) for k, s in expected["events"]} <= events
