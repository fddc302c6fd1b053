"""``LogReport.from_json``: the report a far side sends (``to_json(data=True)``) rebuilds to the same report,
for every real log in tests/data/real-logs (one test over the folder: a new log is a new case)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainprobe.errors import TrainprobeError
from trainprobe.metrics import LogReport, Options, analyze
from trainprobe.metrics.analyze import analyze_json
from trainprobe.metrics.html import render_html

REAL_LOGS = Path(__file__).parents[1] / "data" / "real-logs"
CASES = sorted(p for p in REAL_LOGS.iterdir() if p.name != "PROVENANCE.md")


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_a_report_round_trips_through_json(path: Path) -> None:
    try:
        report = analyze([path])
    except TrainprobeError:
        pytest.skip("not a readable log")  # the unreadable cases have their own tests
    document = json.loads(json.dumps(report.to_json(data=True)))  # what crosses the wire
    rebuilt = LogReport.from_json(document)
    assert json.loads(json.dumps(rebuilt.to_json(data=True, series=True))) == json.loads(
        json.dumps(report.to_json(data=True, series=True))
    )
    assert render_html(rebuilt) == render_html(report)


def test_analyze_json_takes_the_options_and_a_plain_document_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    log.write_text("".join(f"step {s} loss {1.0 + (6.0 if s == 120 else 0.0):.2f}\n" for s in range(140)))
    strict = LogReport.from_json(analyze_json([str(log)], Options(threshold=3.0).to_json()))
    assert [(f.kind, f.step) for f in strict.findings][:1] == [("spike", 120.0)]
    with pytest.raises(ValueError, match="without its data"):
        LogReport.from_json(analyze([log]).to_json())
    with pytest.raises(TrainprobeError, match="unknown log option 'treshold'"):
        analyze_json([str(log)], {"treshold": 3.0})
