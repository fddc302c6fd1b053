"""Lost rows: a series logged every N steps with a hole of two or three intervals in it says a row or two were
lost (a logger that dropped records, lines missing from the file), once per hole, at the step that is
missing; a series whose intervals vary, a long pause in logging, or a resume is no such hole."""

from __future__ import annotations

from trainprobe.metrics import analyze
from trainprobe.metrics.findings import MISSING, Finding


def _rows(steps: list[int]) -> list[dict[str, float]]:
    return [{"step": float(s), "loss": 2.0 - 0.001 * s, "acc": 0.5 + 0.0001 * s} for s in steps]


def _lost(steps: list[int]) -> list[Finding]:
    return [f for f in analyze([_rows(steps)]).findings if f.kind == MISSING and "has no row" in f.message]


def _missing(steps: list[int]) -> list[Finding]:
    return [f for f in analyze([_rows(steps)]).findings if f.kind == MISSING]


def test_one_row_missing_from_a_series_logged_every_10_steps_is_one_finding_at_its_step() -> None:
    steps = [s for s in range(0, 500, 10) if s != 230]
    found = _missing(steps)
    assert len(found) == 1
    f = found[0]
    assert (f.severity, f.metric, f.step, f.end_step) == ("warning", "loss", 230.0, 230.0)
    assert "step 230" in f.message
    assert "every 10 steps" in f.message
    assert "acc" in f.message  # the other field of the same rows is named, not told again
    assert "logger" in f.suggestion  # not the advice for values a step skipped (fp16 overflow)
    assert "fp16" not in f.suggestion


def test_two_rows_missing_in_a_row_are_one_finding_that_spans_them() -> None:
    steps = [s for s in range(0, 500, 10) if s not in (230, 240)]
    found = _missing(steps)
    assert [(f.step, f.end_step, f.magnitude) for f in found] == [(230.0, 240.0, 2.0)]


def test_two_holes_are_two_findings() -> None:
    steps = [s for s in range(0, 500, 10) if s not in (120, 330)]
    assert [f.step for f in _missing(steps)] == [120.0, 330.0]


def test_a_complete_series_has_none() -> None:
    assert _missing(list(range(0, 500, 10))) == []


def test_an_irregular_series_has_none() -> None:
    steps = [0, 7, 19, 26, 41, 50, 58, 73, 80, 95, 101, 118, 124, 139, 150]
    assert _lost(steps) == []


def test_a_large_gap_is_not_this_detectors() -> None:
    steps = [s for s in range(0, 500, 10) if not 200 <= s < 300]
    assert _lost(steps) == []


def test_many_holes_are_a_coarser_grid_not_lost_rows() -> None:
    steps = [s for s in range(0, 500, 10) if s not in (50, 120, 200, 330)]
    assert _lost(steps) == []


def test_a_resume_is_not_a_hole() -> None:
    steps = list(range(0, 300, 10)) + list(range(250, 500, 10))
    steps.remove(400)
    assert _lost(steps) == []


def test_a_last_row_off_the_grid_does_not_hide_a_hole() -> None:
    steps = [s for s in range(0, 500, 10) if s != 230] + [495]
    assert [f.step for f in _lost(steps)] == [230.0]
