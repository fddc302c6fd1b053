"""Issue 24, a log that does not begin where its run did (a rotated log, the ``tail`` of a running one): a
line's step is the one the whole log gives it, not one counted from where the file begins."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainprobe.metrics import read_logs


def _steps_by_loss(path: Path, lines: list[str]) -> dict[float, float]:
    path.write_text("\n".join(lines) + "\n")
    (run,) = read_logs(path)
    pairs = zip(run.steps, run.columns["loss"], strict=True)
    return {round(float(v), 6): float(s) for s, v in pairs if v == v}


def test_epoch_and_iteration_cut_mid_run_keep_their_steps(tmp_path: Path) -> None:
    # mmdetection-like: Epoch [E][i/100], epochs from 1, a line every 20 iterations
    lines = [
        f"Epoch [{e}][{i}/100]\tlr: 1.0e-02, loss: {1 / (e * 100 + i):.6f}"
        for e in range(1, 13)
        for i in range(20, 101, 20)
    ]
    whole = _steps_by_loss(tmp_path / "whole.log", lines)
    cut = _steps_by_loss(tmp_path / "cut.log", lines[len(lines) // 2 :])
    assert cut
    assert all(whole[v] == s for v, s in cut.items()), "a cut log moved its lines to other steps"


def test_rows_before_the_first_epoch_line_of_a_cut_log_belong_to_the_epoch_before_it(
    tmp_path: Path,
) -> None:
    # Keras 1 stdout: "Epoch N/20" then the epoch's row
    lines: list[str] = []
    for e in range(1, 21):
        row = f"60000/60000 [====] - 3s - loss: {1 / e:.6f} - acc: {1 - 1 / (e + 1):.4f}"
        lines += [f"Epoch {e}/20", row]
    whole = _steps_by_loss(tmp_path / "whole.log", lines)
    cut = _steps_by_loss(tmp_path / "cut.log", lines[9:])  # begins with epoch 5's row, then "Epoch 6/20"
    assert min(cut.values()) == whole[round(1 / 5, 6)] == 5
    assert all(whole[v] == s for v, s in cut.items())
    assert np.isfinite(list(cut.values())).all()
