"""The pure parts: reading a log's tail, and summaries that never cut silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainprobe.mcp import summary
from trainprobe.mcp.tools import read_tail


def test_the_tail_is_the_last_complete_lines_and_where_they_start(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    lines = [f"step {i} loss {i % 7}" for i in range(200_000)]  # ~4 MB: several blocks back from the end
    log.write_text("\n".join(lines) + "\nstep 200000 lo")  # the last line is still being written
    data = log.read_bytes()
    tail, first, size = read_tail(str(log), 1500)
    assert tail == lines[-1500:]
    assert size == len(data)
    assert data[first:].startswith(b"step 198500 loss ")


def test_a_short_file_is_read_whole(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("a\nb\n")
    assert read_tail(str(log), 100) == (["a", "b"], 0, 4)


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
    text = summary.logs(doc).text(None)
    assert text.count("- error spike") == 10
    assert "… 15 more findings in the full report" in text
    assert text.endswith("full report: not written")


def test_a_document_the_summary_cannot_read_is_still_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainprobe.mcp.answer import answer
    from trainprobe.mcp.server import tool

    monkeypatch.setenv("TRAINPROBE_RUNS_DIR", str(tmp_path))
    document = {"verdict": "clean", "totals": {"parameters": "many"}}  # a field whose type changed
    result = answer(tool("scan"), lambda: document)
    assert not result.is_error
    assert result.structured_content == document
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("(no summary: ValueError: ")
    assert json.loads(Path(text.splitlines()[-1].split(": ", 1)[1]).read_text()) == document
