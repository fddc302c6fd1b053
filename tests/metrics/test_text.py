"""The plain-text reader: every line shape the issue lists, timestamps, lines that are not metrics, fast
paths."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trainprobe.metrics.readers.jsonl import read_json_lines
from trainprobe.metrics.readers.text import read_text_file


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("step: 5 loss: 2.5 acc: 0.1", {"loss": 2.5, "acc": 0.1}),
        ("step=5 loss=2.5 acc=0.1", {"loss": 2.5, "acc": 0.1}),
        ("step 5 loss 2.5 acc 0.1", {"loss": 2.5, "acc": 0.1}),
        ("step:5 loss:2.5 acc:0.1", {"loss": 2.5, "acc": 0.1}),
        ("step 5 | loss 2.5 | acc 0.1", {"loss": 2.5, "acc": 0.1}),
        (
            "step:5/6200 train_loss:2.5 train_time:196649ms step_avg:213.4ms",
            {"train_loss": 2.5, "step_avg": 213.4},
        ),
        (
            " iteration        5/  159576 | lm loss: 2.500000E+00 | loss scale: 4096.0 |",
            {"lm loss": 2.5, "loss scale": 4096.0},
        ),
        ("s:5 trl:2.5 lr:0.0006 norm:0.31", {"trl": 2.5, "lr": 0.0006, "norm": 0.31}),
    ],
)
def test_line_shapes(tmp_path: Path, line: str, expected: dict[str, float]) -> None:
    path = tmp_path / "train.log"
    path.write_text(line + "\n" + line.replace("5", "6", 1) + "\n")
    run = read_text_file(path, name="t")
    assert list(run.steps) == [5.0, 6.0]
    for key, value in expected.items():
        assert run.columns[key][0] == pytest.approx(value)


def test_units_give_wall_clock_and_nan_is_a_value(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(
        "step:1/10 train_loss:nan train_time:1000ms step_avg:nanms\nstep:2/10 train_loss:2.0 "
        "train_time:3500ms step_avg:1750.00ms\n"
    )
    run = read_text_file(path, name="t")
    assert np.isnan(run.columns["train_loss"][0])
    assert run.mask("train_loss")[0]
    assert run.wall is not None
    assert list(run.wall) == [1.0, 3.5]


@pytest.mark.parametrize(
    ("prefix", "gap"),
    [("2026-01-02T03:04:{s:02d}.500Z ", 1.0), ("[23:59:{s:02d}] ", 1.0), ("17000000{s:02d}.25 ", 1.0)],
    ids=["iso", "hms", "epoch"],
)
def test_timestamps_at_line_start(tmp_path: Path, prefix: str, gap: float) -> None:
    path = tmp_path / "train.log"
    path.write_text("".join(prefix.format(s=s) + f"step {s} loss 1.0\n" for s in (58, 59)))
    run = read_text_file(path, name="t")
    assert run.wall is not None
    assert run.wall[1] - run.wall[0] == pytest.approx(gap)


def test_hms_wraps_past_midnight(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text("[23:59:59] step 1 loss 1.0\n[00:00:01] step 2 loss 1.0\n")
    run = read_text_file(path, name="t")
    assert run.wall is not None
    assert run.wall[1] - run.wall[0] == pytest.approx(2.0)


def test_source_code_tracebacks_and_prose_are_not_metrics(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(
        "import torch\n    lr = 0.1\n    x = model(batch)  # step 3\nTraceback (most recent call last):\n"
        '  File "train.py", line 12, in <module>\nThe loss went from 6.4 to 14 at step 7000 and then down.\n'
        "    torch.save(state, f'ckpt/step{step}.pt')  # saving the checkpoint\n"
        "step 1 loss 2.0\nstep 2 loss 1.9\n"
    )
    run = read_text_file(path, name="t")
    assert list(run.columns) == ["loss"]
    assert len(run) == 2
    # the echoed torch.save line is code, not a save; the traceback is a failure
    assert [e.kind for e in run.events] == ["failure"]
    assert run.skipped_lines == 6  # the traceback's first line is that event


def test_big_uniform_chunks_parse_like_single_lines(tmp_path: Path) -> None:
    """The literal-split and regex fast paths give the same rows as the per-line parser, in order, with
    odd lines (an event, a differently shaped eval line) in the middle of a chunk."""
    lines = [f"step {s} | loss {1 + s % 7 / 10:.4f} | lr {3e-4:.2e}" for s in range(20000)]
    lines.insert(9000, "Saving checkpoint to ckpt/step-8999")
    lines.insert(12000, "step 11999 | val_loss 1.5")
    path = tmp_path / "big.log"
    path.write_text("\n".join(lines) + "\n")
    run = read_text_file(path, name="t")
    assert len(run) == 20001
    assert [e.step for e in run.events] == [8999.0]
    assert run.events[0].row == 9000
    loss = run.columns["loss"][run.mask("loss")]
    assert np.allclose(loss, [1 + s % 7 / 10 for s in range(20000)])
    assert run.columns["val_loss"][run.mask("val_loss")].tolist() == [1.5]


def test_jsonl_fast_path_and_fallback_agree(tmp_path: Path) -> None:
    lines = [f'{{"step": {s}, "loss": {s / 1000:.3f}, "lr": 1e-4}}' for s in range(10000)]
    lines[5000] = '{"lr": 1e-4, "step": 5000, "loss": NaN, "note": "x"}'
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n")
    run = read_json_lines(path, name="m", fmt="jsonl")
    assert len(run) == 10000
    assert run.steps[-1] == 9999
    assert np.isnan(run.columns["loss"][5000])
    assert run.columns["loss"][9999] == pytest.approx(9.999)
