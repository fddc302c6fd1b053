"""The log's own facts (trainprobe.metrics.log_facts): a series that is not measured, a save cadence off by a
step, save lines against the units on disk. Healthy logs, the real ones included, have none."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metrics.synthetic import write_seed_story
from trainprobe.conventions import is_log_name
from trainprobe.errors import TrainprobeError
from trainprobe.metrics import read_logs
from trainprobe.metrics.log_facts import (
    CONSTANT_SERIES,
    IRREGULAR_CADENCE,
    SAVE_LINE_WITHOUT_UNIT,
    SAVES_ELSEWHERE,
    UNIT_WITHOUT_SAVE_LINE,
    LogFact,
    log_facts,
    saves_elsewhere,
    saves_without_unit,
    units_without_save_line,
)

REAL_LOGS = Path(__file__).parents[1] / "data" / "real-logs"


def _write_log(
    path: Path,
    *,
    steps: int = 200,
    toks: str = "51234",
    saves: tuple[int, ...] = (),
    stall_s: float = 120.0,
    save_dir: str = "/root/ckpts",
) -> Path:
    """A Python-logging style log: a loss that moves, a throughput column (``toks``: the same text on every
    line, or "measured" for one that moves), and a save line (with a stall after it) at each of ``saves``."""
    wall = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    lines = []
    for step in range(1, steps + 1):
        wall += dt.timedelta(seconds=0.5)
        rate = f"{51000 + (step * 37) % 500}" if toks == "measured" else toks
        stamp = wall.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        lines.append(f"{stamp} - INFO - step {step} | loss {2.0 / (1 + step / 50):.4f} | tok/s {rate}")
        if step in saves:
            lines.append(f"{stamp} - INFO - Saving checkpoint to {save_dir}/step_{step}")
            wall += dt.timedelta(seconds=stall_s)
    path.write_text("\n".join(lines) + "\n")
    return path


def _facts(path: Path) -> list[LogFact]:
    return log_facts(read_logs(path))


def test_a_throughput_the_same_on_every_line_even_across_stalls_is_not_measured(tmp_path: Path) -> None:
    (fact,) = _facts(_write_log(tmp_path / "train.log", saves=(100,)))
    assert (fact.kind, fact.metric) == (CONSTANT_SERIES, "tok/s")
    assert fact.text.startswith(
        "tok/s is 51234 on every one of its 200 rows, even across the log's 1 stall(s)"
    )
    assert "not a measurement" in fact.text
    assert _facts(_write_log(tmp_path / "measured.log", saves=(100,), toks="measured")) == []
    # A rounded rate (two digits) cannot show a change: no fact.
    assert _facts(_write_log(tmp_path / "rounded.log", toks="3.1")) == []


def test_a_setting_printed_on_every_line_is_no_fact(tmp_path: Path) -> None:
    lines = [f"step {s} | loss {1 / s:.4f} | lr 0.000300 | batch_size 256 | epoch 1" for s in range(1, 300)]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    assert _facts(tmp_path / "train.log") == []


def test_a_loss_that_never_moves_is_a_fact(tmp_path: Path) -> None:
    lines = [f"step {s} | loss 0.6931 | acc {0.5 + (s % 7) / 100:.3f}" for s in range(1, 100)]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    (fact,) = _facts(tmp_path / "train.log")
    assert fact.kind == CONSTANT_SERIES
    assert fact.text.startswith("loss is 0.6931 on every one of its 99 rows: a loss that never moves")


def test_a_save_off_its_cadence_by_one_step_is_irregular(tmp_path: Path) -> None:
    """The seed's log: saves at 2000 and then 4001."""
    (fact,) = _facts(write_seed_story(tmp_path / "train.log"))
    assert fact.kind == IRREGULAR_CADENCE
    assert fact.steps == (4001,)
    assert "the saves (at steps 2000, 4001) follow a cadence of 2000 steps" in fact.text
    assert "the one at step 4001 is 1 step(s) off it (after 4000)" in fact.text


def test_the_cadence_is_the_one_that_explains_the_most_saves(tmp_path: Path) -> None:
    """40 divides half of these saves, 20 all but one: the cadence is 20, and 81 is one step off it."""
    log = _write_log(tmp_path / "train.log", steps=120, saves=(20, 40, 60, 81, 100), toks="measured")
    (fact,) = _facts(log)
    assert fact.kind == IRREGULAR_CADENCE
    assert "follow a cadence of 20 steps, but the one at step 81 is 1 step(s) off it (after 80)" in fact.text


@pytest.mark.parametrize(
    "saves",
    [
        (50, 100, 150, 200, 250, 300),  # every 50 steps
        (1999, 3999, 5999),  # counted from 0: the same offset at every save is a cadence
        (1, 21, 41, 61, 81),  # a save at step 1 and every 20 after
        (2000, 4000, 5001),  # the final save, at the run's last step
    ],
)
def test_a_regular_cadence_is_no_fact(tmp_path: Path, saves: tuple[int, ...]) -> None:
    log = _write_log(tmp_path / "train.log", steps=max(saves), saves=saves, toks="measured", stall_s=1)
    assert _facts(log) == []


def test_save_lines_that_name_another_directory_say_the_run_was_copied() -> None:
    named = [
        ("/root/ckpts/step_2000", "/data/copy/ckpts/step_2000"),
        ("/root/ckpts/step_4001", "/data/copy/ckpts/step_4001/model.pt"),
        ("/root/ckpts/step_3000", "/data/copy/ckpts/step_3500"),  # a folder filed under another step
    ]
    (fact,) = saves_elsewhere(named)
    assert fact.kind == SAVES_ELSEWHERE
    assert fact.text.startswith(
        "3 save line(s) name /root (e.g. /root/ckpts/step_2000), but the units are in /data/copy: the run "
        "was copied or moved, so the units' file times are when they were copied, not when they were saved"
    )
    same = [("/data/copy/ckpts/step_2000", "/data/copy/ckpts/step_2000/model.pt")]
    assert saves_elsewhere(same) == []
    assert saves_elsewhere([("ckpts/step_2000", "/data/copy/ckpts/step_2000")]) == []  # relative: unknown


def test_units_without_a_save_line_are_named_when_the_log_records_saves() -> None:
    copies = {"ckpts/best": "ckpts/step_3000"}
    (fact,) = units_without_save_line(["ckpts/best", "ckpts/step_9"], copies, saves_logged=3)
    assert fact.kind == UNIT_WITHOUT_SAVE_LINE
    assert fact.text.startswith(
        "2 checkpoint unit(s) have no save line in the log, which records 3 save(s): ckpts/best (the same "
        "tensors as ckpts/step_3000: a copy), ckpts/step_9 — put there by something else"
    )
    # A log that records no save says nothing about the units.
    assert units_without_save_line(["ckpts/step_9"], {}, saves_logged=0) == []


def test_saves_without_a_unit_later_than_every_unit_or_between_units_without_a_rotation() -> None:
    (later,) = saves_without_unit([5000], [1000, 2000, 3000])
    assert later.kind == SAVE_LINE_WITHOUT_UNIT
    assert later.text.startswith("the log's save(s) at step 5000 have no unit on disk, later than every unit")
    (between,) = saves_without_unit([2000], [1000, 3000])
    assert "though units before and after them are there" in between.text
    # A rotation (keep the newest few, and the best): the oldest are gone, and a gap between kept units too.
    assert saves_without_unit([50, 100], [150, 200]) == []
    assert saves_without_unit([50, 150], [100, 200]) == []
    assert saves_without_unit([100], []) == []  # a log alone, no units to hold it against


def test_logs_prints_the_facts(tmp_path: Path) -> None:
    log = _write_log(tmp_path / "train.log", saves=(100,))
    proc = subprocess.run(
        [sys.executable, "-m", "trainprobe", "logs", str(log)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "250"},
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    said = " ".join(proc.stdout.split())
    assert "fact tok/s is 51234 on every one of its 200 rows, even across the log's 1 stall(s)" in said


def test_logs_json_carries_the_facts(tmp_path: Path) -> None:
    """The same facts the terminal prints, as ``facts`` of the ``logs --json`` document and in the MCP
    summary of the ``logs`` tool."""
    import json

    from trainprobe.mcp.tools.logs import summarise

    log = _write_log(tmp_path / "train.log", saves=(100,))
    proc = subprocess.run(
        [sys.executable, "-m", "trainprobe", "logs", str(log), "--json"], capture_output=True, text=True
    )
    doc = json.loads(proc.stdout)
    assert doc["facts"] == [f.to_json() for f in _facts(log)]
    (fact,) = doc["facts"]
    assert (fact["kind"], fact["metric"]) == (CONSTANT_SERIES, "tok/s")
    assert f"- fact: {fact['text']}" in summarise(doc).text(None)


@pytest.mark.slow
def test_no_real_log_has_a_fact() -> None:
    """The real logs of tests/data/real-logs, read as they are: none is a copied run, none prints a constant
    rate, none saves off its cadence."""
    read = 0
    found: list[tuple[str, str]] = []
    for path in sorted(p for p in REAL_LOGS.rglob("*") if p.is_file() and is_log_name(p.name)):
        try:
            runs = [r for r in read_logs(path) if len(r)]
        except (TrainprobeError, OSError, ValueError):
            continue
        read += bool(runs)
        found.extend((str(path.relative_to(REAL_LOGS)), f.text) for f in log_facts(runs))
    assert read > 100
    assert found == []
