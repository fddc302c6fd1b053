"""Issue 24, loops inside loops: a number glued to the bracket after it stands by itself
(``Epoch 1[16/500]``), an ``N/M`` counter whose total is another loop's (an eval's progress bar between a
train loop's epochs) is no step of the run, an eval banner holds over the progress bars under it, and a
record's next lines keep the record's split."""

from __future__ import annotations

from pathlib import Path

from trainprobe.metrics import analyze
from trainprobe.metrics.readers.text.fields import read_fields


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_number_glued_to_a_bracket_stands_by_itself() -> None:
    got = read_fields("Epoch 3[16/500]: loss:0.7141, lr:0.001").values
    assert (got["Epoch"], got["#counter"], got["loss"]) == (3, 16, 0.7141)
    assert read_fields("loss: 3.43(3.44) acc 0.5").values == {"loss": 3.43, "acc": 0.5}


def _epochs(eval_bar: bool) -> list[str]:
    lines: list[str] = []
    for e in range(1, 9):
        lines += [f"Epoch {e} [{i}/500]: loss: {1 / (e + i / 500):.4f}" for i in (100, 200, 300, 400, 500)]
        lines += ["Evaluating"] + ([f"{n}/20 [00:01<00:00, 9.5it/s]" for n in (0, 20)] if eval_bar else [])
        lines += [f"mAP: {0.5 + e / 40:.4f}", f"precision: {0.6 + e / 50:.4f}, recall: {0.4 + e / 60:.4f}"]
    return lines


def test_an_eval_loops_progress_bar_is_no_step_of_the_train_loop(tmp_path: Path) -> None:
    report = analyze(_write(tmp_path / "train.log", _epochs(eval_bar=True)))
    train = next(r for r in report.runs if "loss" in r.metrics)
    assert (train.steps[0], train.steps[-1]) == (100, 4000)
    assert "writers" not in train.step_why
    evals = next(r for r in report.runs if "mAP" in r.columns)  # (an eval metric by its name)
    mask = evals.mask("mAP")
    assert list(evals.steps[mask]) == list(range(1, 9))
    assert {"eval/precision", "eval/recall"} <= set(evals.columns)
    assert not report.partly_read


def test_a_total_that_changes_once_is_the_same_loop_counted_anew(tmp_path: Path) -> None:
    lines = [f"step {s}/1000 loss {1 / s:.4f}" for s in range(10, 500, 10)]
    lines += [f"step {s}/2000 loss {1 / s:.4f}" for s in range(500, 1500, 10)]
    (run,) = analyze(_write(tmp_path / "train.log", lines)).runs
    assert (run.steps[0], run.steps[-1]) == (10, 1490)
