"""A log partly read by a record kind left unread that is far rarer than its rows (issue 24): an eval line
every ten train lines that the reader did not understand leaves series out though it never outnumbers the
rows, and a log that leaves it so is never healthy; a progress bar's own figures are no such record, and a
line kept for its counter whose measurements went unnamed was read only in part."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainprobe.metrics import analyze
from trainprobe.metrics.coverage import MISSED_SHARE, ShapeCounter


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _train_and_eval(every: int, rows: int = 200) -> list[str]:
    lines: list[str] = []
    for i in range(rows):
        lines.append(f"it {i} loss {1 / (i + 1):.4f}")
        if i % every == every - 1:  # an eval record of a shape the reader cannot pair with names
            lines.append(f"  {i}   {0.5 / (i + 1):.4f}  {i / 300:.4f}  3.2e-4")
    return lines


def test_an_unread_record_kind_every_tenth_row_makes_the_log_partly_read(tmp_path: Path) -> None:
    report = analyze(_write(tmp_path / "train.log", _train_and_eval(every=10)))
    ((run, why),) = report.partly_read
    assert run.name == "train"
    assert why.startswith("20 numeric lines of repeating shapes were not read, against 200 read")
    doc = report.to_json()
    assert doc["verdict"] == "not read"
    assert report.exit_code == 2


def test_a_few_unread_lines_against_many_rows_leave_the_log_read(tmp_path: Path) -> None:
    lines = _train_and_eval(every=50, rows=1000)  # 20 lines against 1000 rows: 2%
    assert MISSED_SHARE * 1000 > 20
    report = analyze(_write(tmp_path / "train.log", lines))
    assert report.partly_read == []
    assert report.exit_code == 0


def test_a_progress_bar_under_each_epoch_is_no_unread_metric(tmp_path: Path) -> None:
    lines: list[str] = []
    for i in range(40):  # ultralytics: a train table, then a validation table whose header holds its bar
        lines += [
            "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss",
            f"       {i + 1}/40         0G     {1 / (i + 1):.4f}     {0.5 / (i + 1):.4f}    "
            f"{0.3 / (i + 1):.4f}",
            "                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): 100% "
            f"━━━━━━━━━━━━ 2/2 {10 + i / 7:.1f}it/s {i / 9:.1f}s",
            f"                   all         24         24      {i / 80:.3f}      {i / 90:.3f}      "
            f"{i / 100:.3f}      {i / 120:.3f}",
        ]
    report = analyze(_write(tmp_path / "train.log", lines))
    (run,) = report.runs
    assert run.coverage is not None
    assert (run.coverage.row_lines, run.coverage.unread[0].lines) == (80, 40)  # the 40 bars: not read
    assert report.partly_read == []
    assert report.exit_code == 0


def test_a_progress_bar_whose_postfix_holds_values_still_looks_like_metrics() -> None:
    bare, postfix = ShapeCounter(), ShapeCounter()
    for i in range(40):
        bar = f"100% ━━━━━━━━━━━━ 2/2 {10 + i / 7:.1f}it/s {i / 9:.1f}s"
        bare.unread(bar, i + 1)
        postfix.unread(f"{bar} {0.5 / (i + 1):.4f}", i + 1)
    assert [s.looks_like_metrics for s in bare.coverage().unread] == [False]
    assert [s.looks_like_metrics for s in postfix.coverage().unread] == [True]


def _with_counter_lines(line: str) -> list[str]:
    lines: list[str] = []
    for i in range(200):
        lines.append(f"step {i} loss {1 / (i + 1):.4f}")
        if i % 10 == 9:
            lines.append(line.format(n=i // 10, a=0.5 / (i + 1), b=i / 300, t=i, r=10 + i / 7))
    return lines


def test_lines_kept_for_their_counter_whose_measurements_went_unnamed_are_partly_read(tmp_path: Path) -> None:
    # ``3/20  0.0455  0.0300``: the counter is read, the two values after it have no name and are lost
    report = analyze(_write(tmp_path / "train.log", _with_counter_lines("  {n}/20  {a:.4f}  {b:.4f}")))
    ((run, why),) = report.partly_read
    assert run.metrics == ["loss"]
    assert why.startswith("20 numeric lines of repeating shapes were not read")
    assert "0/20  0.0500  0.0300" in why
    assert report.exit_code == 2


@pytest.mark.parametrize(
    "line",
    [
        "  {n}/20 [==>...] - ETA: {t}s",  # a counter and whole numbers: nothing measured went unnamed
        "Evaluating: 100%|██████████| {n}/20 [00:01<00:00, {r:.2f}it/s]",  # a bar's own figures
    ],
    ids=["eta", "bar"],
)
def test_progress_counter_lines_without_unnamed_measurements_leave_the_log_read(
    tmp_path: Path, line: str
) -> None:
    report = analyze(_write(tmp_path / "train.log", _with_counter_lines(line)))
    assert report.partly_read == []
    assert report.exit_code == 0
