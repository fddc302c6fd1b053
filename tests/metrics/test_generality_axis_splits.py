"""Issue 24, more general mechanisms: the finest counter over an epoch when both move once a row, a split
named by the file (or by the word that leads a line). (A jump of orders of magnitude inside a divergence,
told as where it broke: the real log spinningup__ddpg-liver-not-learn-lossq-jumps.)"""

from __future__ import annotations

from pathlib import Path

from trainprobe.metrics import analyze, read_logs


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_counter_of_many_units_a_row_is_the_axis_over_the_epoch(tmp_path: Path) -> None:
    rows = ["Epoch\tAverageEpRet\tTotalEnvInteracts\tTime"]
    rows += [f"{e}\t{-100 + e * 0.5:.3f}\t{e * 3000 - 1}\t{e * 200}" for e in range(1, 41)]
    (run,) = read_logs(_write(tmp_path / "progress.txt", rows))
    assert run.step_key == "TotalEnvInteracts"
    assert (run.steps[0], run.steps[-1]) == (2999, 119999)


def test_a_clock_in_whole_seconds_is_no_step_even_beside_an_epoch(tmp_path: Path) -> None:
    rows = ["epoch,loss,time"] + [f"{e},{1 / e:.4f},{e * 60}" for e in range(1, 21)]
    (run,) = read_logs(_write(tmp_path / "log.csv", rows))
    assert run.step_key == "epoch"
    assert (run.steps[0], run.steps[-1]) == (1, 20)


def test_train_and_eval_files_of_one_shape_take_their_split_from_the_file_name(tmp_path: Path) -> None:
    learn = ["iter\tLogloss"] + [f"{i}\t{0.6 * 0.99**i:.5f}" for i in range(200)]
    test = ["iter\tLogloss"] + [
        f"{i}\t{0.6 - 0.005 * min(i, 40) + 0.001 * max(0, i - 40):.5f}" for i in range(200)
    ]
    report = analyze([_write(tmp_path / "learn_error.tsv", learn), _write(tmp_path / "test_error.tsv", test)])
    (run,) = report.runs
    assert set(run.metrics) == {"Logloss", "eval/Logloss"}
    assert (run.steps[0], run.steps[-1]) == (0, 199)
    over = [f for f in report.findings if f.kind == "overfitting"]
    assert [f.metric for f in over] == ["eval/Logloss"]
    assert 30 <= over[0].step <= 50


def test_a_file_named_test_alone_keeps_its_columns(tmp_path: Path) -> None:
    (run,) = analyze(
        _write(tmp_path / "test.log", [f"step {i} loss {1 / (i + 1):.4f}" for i in range(30)])
    ).runs
    assert run.metrics == ["loss"]


def test_a_split_word_leading_a_line_names_the_split_of_its_fields(tmp_path: Path) -> None:
    lines = [f"Step {s}, Total Loss: {3 - s / 1000:.4f}" for s in range(100, 2001, 100)]
    lines += [f"Validation Step {s}, Total Loss: {2.5 - s / 2000:.4f}" for s in (1000, 2000)]
    runs = read_logs(_write(tmp_path / "log.txt", lines))
    columns = {c: int(r.mask(c).sum()) for r in runs for c in r.metrics}
    assert columns == {"Total Loss": 20, "eval/Total Loss": 2}
