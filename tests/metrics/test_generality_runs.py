"""Issue 24, several runs in one file: records of another shape counted by a step key of their own, all after
the first run's, are a run of their own (not a pile on one step of the other run's axis); step keys whose
rows interleave (an eval line's own key between the train lines') stay one run."""

from __future__ import annotations

from pathlib import Path

from trainprobe.metrics import analyze


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_second_run_of_another_shape_is_a_run_of_its_own(tmp_path: Path) -> None:
    first = [f"iter {i} loss {2 / (i + 1):.4f}" for i in range(100)]
    second = [
        f"Epoch [{e}/20] Step [{s}/100] Loss: {3 / (s + e * 100):.4f}"
        for e in range(1, 21)
        for s in (50, 100)
    ]
    report = analyze(_write(tmp_path / "train.log", [*first, "", "starting again", *second]))
    assert [(r.step_key, len(r)) for r in report.runs] == [("iter", 100), ("Step", 40)]
    assert report.runs[1].name.startswith("train (run 2, from line 103)")
    assert not report.partly_read


def test_step_keys_that_interleave_are_one_run(tmp_path: Path) -> None:
    lines: list[str] = []
    for i in range(1, 101):
        lines.append(f"iteration {i} lm loss {2 / i:.4f}")
        if i % 10 == 0:
            lines.append(f"validation loss at iteration {i} | lm loss value: {2.1 / i:.4f}")
    (run,) = analyze(_write(tmp_path / "train.log", lines)).runs
    assert run.step_key == "iteration"
    assert (run.steps[0], run.steps[-1]) == (1, 100)
