"""Issue 24, being honest where the reading ends: an axis that piles a metric's values on a few steps (a step
axis coarser than the records) makes the log partly read, never healthy; restarts, lines logged twice and two
lines sharing a name do not."""

from __future__ import annotations

from pathlib import Path

from trainprobe.metrics import analyze


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _partly(path: Path) -> list[str]:
    return [why for _run, why in analyze(path).partly_read]


def test_many_values_at_each_step_of_a_coarse_axis_is_partly_read(tmp_path: Path) -> None:
    # ten records an epoch with nothing finer than the epoch to count them by
    lines = [f"epoch {e} loss {2.0 / (1 + e + b / 10):.5f}" for e in range(8) for b in range(10)]
    (why,) = _partly(_write(tmp_path / "train.log", lines))
    assert "'loss' has 80 different values on 8 steps" in why


def test_a_metric_stacked_on_one_step_is_partly_read(tmp_path: Path) -> None:
    # the train records count up; the eval line names a step of its own that never moves
    lines: list[str] = []
    for e in range(6):
        lines += [f"step {e * 10 + i} loss {1.0 / (1 + e * 10 + i):.5f}" for i in range(10)]
        lines.append(f"step 10 val_acc {0.5 + e * 0.07:.4f}")
    (why,) = _partly(_write(tmp_path / "train.log", lines))
    assert "'val_acc' has 6 different values on 1 step " in why


def test_restarts_over_the_same_steps_are_read(tmp_path: Path) -> None:
    lines = [f"step {s} loss {1.0 / (s + run):.5f}" for run in (1, 2, 3, 4) for s in range(1, 30)]
    assert not _partly(_write(tmp_path / "train.log", lines))


def test_every_line_logged_twice_is_read(tmp_path: Path) -> None:
    lines = [line for s in range(40) for line in [f"step {s} loss {1.0 / (s + 1):.5f}"] * 3]
    assert not _partly(_write(tmp_path / "train.log", lines))


def test_two_lines_sharing_a_name_at_each_step_are_read(tmp_path: Path) -> None:
    lines = [
        line
        for e in range(1, 20)
        for line in (f"epoch {e} accuracy {0.5 + e / 50:.4f}", f"epoch {e} accuracy {0.45 + e / 60:.4f}")
    ]
    assert not _partly(_write(tmp_path / "train.log", lines))


def test_a_source_location_before_a_number_is_no_field(tmp_path: Path) -> None:
    """``(train.py 222)``, ``(Model.scala:70)``: where the line was logged from, whatever the language."""
    lines = [
        f"[10:00:{s % 60:02d}] (train.py {100 + s % 3}): step {s} loss {1.0 / (s + 1):.5f}" for s in range(30)
    ]
    lines += [f"(Optim.scala:{70 + s % 5}) step {s} acc {s / 100:.3f}" for s in range(30, 60)]
    (run,) = analyze(_write(tmp_path / "train.log", lines)).runs
    assert sorted(run.columns) == ["acc", "loss"]


def test_an_axis_that_starts_over_and_over_is_partly_read(tmp_path: Path) -> None:
    # an iteration counter inside epochs the log never names
    lines = [f"iter {b} loss {1.0 / (1 + e + b / 1000):.5f}" for e in range(20) for b in range(0, 1000, 100)]
    (why,) = _partly(_write(tmp_path / "train.log", lines))
    assert "starts over 19 times (back to 0)" in why


def test_a_few_restarts_are_read(tmp_path: Path) -> None:
    lines = [f"step {s} loss {1.0 / (s + run):.5f}" for run in range(1, 6) for s in range(0, 300, 10)]
    assert not _partly(_write(tmp_path / "train.log", lines))


def test_rows_at_their_row_numbers_beside_a_counter_in_passes_are_partly_read(tmp_path: Path) -> None:
    # ``batch`` names no step, and it starts over each epoch the log never names
    lines = [f"batch {b} loss {1.0 / (1 + e + b / 1000):.5f}" for e in range(20) for b in range(0, 1000, 100)]
    (why,) = _partly(_write(tmp_path / "train.log", lines))
    assert "'batch' counts up in passes that start over at 0" in why
