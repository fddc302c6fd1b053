"""Logs written through a logging library: timestamp and level prefixes (Python ``logging``, loguru,
glog/absl, Hydra) must read as text logs with their fields, wall clock and save events, never as CSV (the
millisecond comma in ``22:36:21,226`` once made them pass for one), and the log that
``trainprobe.demo.race.train`` writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trainprobe.metrics import analyze
from trainprobe.metrics.events import classify_line
from trainprobe.metrics.reading import pick_reader, read_logs

# Each shape: a metric line for step {i} logged at second {s}, and the prefix of a non-metric line.
SHAPES = {
    "python logging": (
        "2026-11-29 22:36:{s:02d},226 INFO step={i} loss=2.{i}",
        "2026-11-29 22:36:{s:02d},226 INFO ",
    ),
    "iso T offset": (
        "2026-11-29T22:36:{s:02d}.226+01:00 INFO step={i} loss=2.{i}",
        "2026-11-29T22:36:{s:02d}.226+01:00 INFO ",
    ),
    "iso T offset no colon": (
        "2026-11-29T22:36:{s:02d}.226+0100 [INFO] step={i} loss=2.{i}",
        "2026-11-29T22:36:{s:02d}.226+0100 [INFO] ",
    ),
    "level logger": (
        "2026-11-29 22:36:{s:02d},226 INFO:root:step={i} loss=2.{i}",
        "2026-11-29 22:36:{s:02d},226 INFO:root:",
    ),
    "basicConfig default": ("INFO:root:step={i} loss=2.{i}", "INFO:root:"),
    "loguru": (
        "2026-11-29 22:36:{s:02d}.226 | INFO     | __main__:main:12 - step={i} loss=2.{i}",
        "2026-11-29 22:36:{s:02d}.226 | INFO     | __main__:main:30 - ",
    ),
    "name dash level": (
        "2026-11-29 22:36:{s:02d},226 - __main__ - INFO - step={i} loss=2.{i}",
        "2026-11-29 22:36:{s:02d},226 - __main__ - INFO - ",
    ),
    "glog": (
        "I1129 22:36:{s:02d}.226 123 train.py:10] step {i} loss 2.{i}",
        "I1129 22:36:{s:02d}.226 123 ckpt.py:4] ",
    ),
    "absl": (
        "I1129 22:36:{s:02d}.226123  4567 train.py:10] step {i} loss 2.{i}",
        "W1129 22:36:{s:02d}.226123  4567 ckpt.py:4] ",
    ),
    "hydra": (
        "[2026-11-29 22:36:{s:02d},226][INFO] - step: {i}, loss: 2.{i}",
        "[2026-11-29 22:36:{s:02d},226][INFO] - ",
    ),
    "hydra with logger name": (
        "[2026-11-29 22:36:{s:02d},226][__main__][INFO] - step: {i}, loss: 2.{i}",
        "[2026-11-29 22:36:{s:02d},226][trainer][INFO] - ",
    ),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_logger_prefixed_lines_read_as_text(tmp_path: Path, shape: str) -> None:
    metric, prefix = SHAPES[shape]
    lines = [metric.format(s=i, i=i) for i in range(1, 30)]
    lines.insert(10, prefix.format(s=10) + "Saving checkpoint to /ckpt/step_10.pt")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")

    (run,) = read_logs(path)

    assert run.format == "text"
    assert list(run.columns) == ["loss"]
    assert run.steps.tolist() == list(range(1, 30))
    assert run.columns["loss"][4] == pytest.approx(2.5)
    assert run.skipped_lines == 0
    assert [(e.kind, e.step) for e in run.events] == [("checkpoint_save", 10.0)]
    if shape == "basicConfig default":  # no timestamp in that format
        assert run.wall is None or np.isnan(run.wall).all()
    else:
        assert run.wall is not None
        assert np.diff(run.wall) == pytest.approx(np.ones(28))


def test_logger_prefixed_big_file_takes_the_template_path_and_keeps_other_lines(tmp_path: Path) -> None:
    """The per-file template (prefix included) parses the uniform lines; a WARNING line and a save line
    between them still come out (as a skipped line and an event)."""
    lines = [
        f"2026-11-29 22:{i // 60 % 60:02d}:{i % 60:02d},226 INFO step={i} loss={1 + i % 7 / 100:.4f}"
        for i in range(3000)
    ]
    lines.insert(1500, "2026-11-29 22:25:00,000 WARNING dataloader is slow")
    lines.insert(2000, "2026-11-29 22:33:20,000 INFO Saving checkpoint to /ckpt/step_1999.pt")
    path = tmp_path / "big.log"
    path.write_text("\n".join(lines) + "\n")

    (run,) = read_logs(path)

    assert len(run) == 3000
    assert run.columns["loss"][8] == pytest.approx(1.01)
    assert run.skipped_lines == 1
    assert [(e.kind, e.step) for e in run.events] == [("checkpoint_save", 1999.0)]
    assert run.wall is not None
    assert np.isfinite(run.wall).all()


@pytest.mark.parametrize(
    "head",
    [
        "2026-11-29 22:36:21,226 INFO step=1 loss=2.3026 lr=0.001\n"
        "2026-11-29 22:36:21,391 INFO step=2 loss=2.3 lr=0.001\n",
        "step: 5, loss: 2.1\nstep: 6, loss: 2.0\n",
        "epoch 1, loss 2.1\nepoch 2, loss 2.0\n",
    ],
)
def test_comma_text_is_not_csv(tmp_path: Path, head: str) -> None:
    path = tmp_path / "train.log"
    path.write_text(head)
    assert pick_reader(path).name == "text"


@pytest.mark.parametrize(
    "head",
    [
        "step,loss\n1,2.0\n2,1.9\n",
        ",step,loss\n0,1,2.0\n1,2,1.9",  # pandas index column, no final newline
        "epoch,step,train_loss,val_loss\n0,0,1.0,\n0,1,0.9,\n",  # Lightning blanks
        '"Step","run a - loss"\n0,1.5\n1,1.4\n',
    ],
)
def test_csv_still_detected(tmp_path: Path, head: str) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text(head)
    assert pick_reader(path).name == "csv"


def test_race_train_log_reads_with_metrics_and_saves(tmp_path: Path) -> None:
    """The exact log ``trainprobe.demo.race.train`` writes (Python logging's timestamp format)."""
    pytest.importorskip("torch")
    from trainprobe.demo.race import train

    log = tmp_path / "train.log"
    train(tmp_path / "run", steps=30, save_every=10, mode="in-loop", layers=2, width=8, log_path=log)

    report = analyze(log)

    (run,) = report.runs
    assert run.format == "text"
    assert set(run.columns) == {"loss", "lr", "grad_norm"}
    assert run.steps.tolist() == list(range(1, 31))
    assert run.skipped_lines == 0
    assert run.wall is not None
    assert np.isfinite(run.wall).all()
    saves = [e for e in report.events[run.name] if e.kind == "checkpoint_save"]
    assert [e.step for e in saves] == [10.0, 20.0, 30.0]
    assert all(e.wall is not None for e in saves)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Saving checkpoint to run/ckpt/step-00000010.pt (step=10)", ("checkpoint_save", 10.0)),
        ("saved checkpoint step=5, loss=2.0", ("checkpoint_save", 5.0)),
        # echoed source: modded-nanogpt prints its script (a real log in tests/data/real-logs)
        ("save_every : int = 0 # every how many steps to save the checkpoint? 0 for only at the end", None),
        ("    ckpt = save_checkpoint(model)", None),
        ("        checkpoint_path=save_checkpoint_dir,", None),
    ],
)
def test_save_lines_with_key_number_fields_are_events_and_source_is_not(
    line: str, expected: tuple[str, float] | None
) -> None:
    assert classify_line(line) == expected
