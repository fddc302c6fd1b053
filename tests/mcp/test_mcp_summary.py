"""The pure parts: summaries that never cut silently, and rank as the library does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainprobe.mcp import summary
from trainprobe.mcp.tools import check, logs


def test_a_long_summary_is_cut_at_a_line_and_says_how_much_is_left(tmp_path: Path) -> None:
    s = summary.Summary()
    for i in range(400):
        s.add(f"line {i:03d} " + "x" * 40)
    text = s.text(tmp_path / "report.json", 12345)
    lines = text.splitlines()
    assert len(text) <= summary.MAX_CHARS
    assert lines[0] == "line 000 " + "x" * 40
    assert lines[-1] == f"full report (JSON, 12,345 bytes): {tmp_path / 'report.json'}"
    shown = sum(line.startswith("line ") for line in lines)
    assert lines[-2] == (
        f"… summary cut here: {400 - shown} more line(s), {(400 - shown) * 50:,} characters; everything is "
        "in the full report"
    )


def test_lists_say_how_many_more_there_are() -> None:
    doc = {"findings": [{"severity": "error", "kind": "spike", "step": i} for i in range(25)], "summary": {}}
    text = logs.summarise(doc).text(None)
    assert text.count("- error spike") == 10
    assert "… 15 more findings in the full report" in text
    assert text.endswith("full report: not written")


def test_a_document_the_summary_cannot_read_is_still_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainprobe.mcp.answer import answer
    from trainprobe.mcp.tools import tool

    monkeypatch.setenv("TRAINPROBE_RUNS_DIR", str(tmp_path))
    document = {"verdict": "clean", "totals": {"parameters": "many"}}  # a field whose type changed
    result = answer(tool("scan"), lambda: document)
    assert not result.is_error
    assert result.structured_content == document
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("(no summary: ValueError: ")
    assert json.loads(Path(text.splitlines()[-1].split(": ", 1)[1]).read_text()) == document


def test_check_lists_the_worst_verdicts_first_in_the_librarys_order() -> None:
    from trainprobe.checkpoint.verdict import ORDER

    verdicts = ["consistent", "unknown", "suspicious", "unreadable", "torn", "corrupt", "nonfinite"]
    doc = {"units": [{"path": f"/c/{v}.pt", "verdict": v} for v in verdicts], "summary": {}}
    listed = [line.split(": ")[0] for line in check.summarise(doc).text(None).splitlines()[1:-1]]
    assert listed == [f"- {v}" for v in ORDER if v in verdicts]
    assert listed[:2] == ["- suspicious", "- nonfinite"]  # before torn: once last, as no verdict of check


def test_the_triage_summary_names_every_conclusion_and_each_advice_once() -> None:
    """Five stalled saves and their five torn files, a blow-up: every mechanism with its confidence and what
    it could not rule out reaches the agent; the same advice is given once."""
    from trainprobe.mcp.tools import triage

    stalls = [{"cause": "save-stall", "step": s + 1, "title": f"the save at step {s} blocked the loop",
               "confidence": "high", "alternatives": ["the save code changed the training state"],
               "related": [{"cause": "save-race", "step": s}], "suggestion": "take the save off the loop"}
              for s in (50, 100, 150, 200, 250)]  # fmt: skip
    tears = [{"cause": "save-race", "step": s, "title": f"the save at step {s} raced training",
              "confidence": "high", "alternatives": [], "suggestion": "do not resume from it"}
             for s in (50, 100, 150, 200, 250)]  # fmt: skip
    doc = {"conclusions": stalls + tears, "answers": {"resume": {"lines": ["resume from a.pt (step 40)"]}}}
    text = triage.summarise(doc).text(None)
    assert len(text) <= summary.MAX_CHARS
    for c in stalls + tears:
        assert f"- step {c['step']}: {c['title']} (high confidence)" in text
    assert text.count("not ruled out: the save code changed the training state") == 5
    assert text.count("joined by time, a separate finding: step 50 (save-race)") == 1
    assert text.count("→ take the save off the loop") == text.count("→ do not resume from it") == 1
    assert text.splitlines()[-2] == "resume from a.pt (step 40)"
