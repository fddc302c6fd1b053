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


def test_a_run_directory_named_for_a_split_makes_no_file_in_it_an_eval_file(tmp_path: Path) -> None:
    """``test_run/`` (or pytest's ``test_*`` directories): its files are runs of their own, not eval rows."""
    rows = [f"step {i} loss {1 + i / 100:.3f}" for i in range(50)]
    paths = [_write(tmp_path / "test_run" / name, rows) for name in ("train.log", "run.out", "notes.md")]
    report = analyze(paths)
    assert sorted(Path(r.path).name for r in report.runs) == ["notes.md", "run.out", "train.log"]
    assert all(r.metrics == ["loss"] for r in report.runs)


def test_a_val_folder_beside_a_train_folder_is_the_eval_split(tmp_path: Path) -> None:
    """FastSpeech2's ``train/log.txt`` and ``val/log.txt``: the folder names the split."""
    train = _write(tmp_path / "train" / "log.txt", [f"step {i} loss {1 / (i + 1):.4f}" for i in range(1, 41)])
    val = _write(tmp_path / "val" / "log.txt", [f"step {i * 10} loss {1.2 / i:.4f}" for i in range(1, 5)])
    (run,) = analyze([train, val]).runs
    assert set(run.metrics) == {"loss", "eval/loss"}


def test_a_split_word_leading_a_line_names_the_split_of_its_fields(tmp_path: Path) -> None:
    lines = [f"Step {s}, Total Loss: {3 - s / 1000:.4f}" for s in range(100, 2001, 100)]
    lines += [f"Validation Step {s}, Total Loss: {2.5 - s / 2000:.4f}" for s in (1000, 2000)]
    runs = read_logs(_write(tmp_path / "log.txt", lines))
    columns = {c: int(r.mask(c).sum()) for r in runs for c in r.metrics}
    assert columns == {"Total Loss": 20, "eval/Total Loss": 2}


def test_a_bracketed_round_first_on_the_line_is_the_step_and_a_pid_after_a_stamp_is_not(
    tmp_path: Path,
) -> None:
    rounds = [f"[{i}]\ttrain-rmse:{1 / (i + 1):.5f}\teval-rmse:{1.1 / (i + 1):.5f}" for i in range(1, 21)]
    (run,) = read_logs(_write(tmp_path / "xgb.log", rounds))
    assert (run.steps[0], run.steps[-1]) == (1, 20)
    pids = [f"[2025-07-01 09:01:{i:02d},339][16238] step {i} loss {1 / i:.4f}" for i in range(1, 21)]
    (run,) = read_logs(_write(tmp_path / "sf_log.txt", pids))
    assert run.step_key == "step"
    assert run.metrics == ["loss"]


def test_the_count_behind_a_percentage_is_no_progress_counter(tmp_path: Path) -> None:
    lines = [
        x
        for a in (0, 100, 0, 0, 4)
        for x in ("Test results:", f"Loss: 2.30{a % 7} | Acc: {a:.3f}% ({a}/100)")
    ]
    report = analyze(_write(tmp_path / "log_train.txt", lines))
    (run,) = report.runs
    assert list(run.steps) == [0, 1, 2, 3, 4]
    assert run.columns["eval/Acc"][1] == 100
    # five evaluations, one of them right by chance: no accuracy that "fell from its best"
    assert [f for f in report.findings if f.severity != "info"] == []
    assert report.partly_read == []  # no counter anywhere: read by position, and that is all there is


def test_rows_at_their_row_numbers_beside_a_counter_not_understood_are_partly_read(tmp_path: Path) -> None:
    lines = [f"tick: {e}, cost: {0.5 - e / 100:.4f}, acc: {0.7 + e / 100:.4f}" for e in range(12)]
    report = analyze(_write(tmp_path / "train.log", lines))
    assert report.runs[0].step_key is None
    ((_run, why),) = report.partly_read
    assert "'tick' counts up" in why
    assert "--step tick" in why
    assert report.exit_code == 2


def test_records_once_an_epoch_beside_a_counter_within_it_are_read_on_the_epoch_axis(tmp_path: Path) -> None:
    lines = []
    for e in range(1, 5):
        lines += [
            f"Epoch [{e}/5], Step [{s}/62], Mel Loss: {0.7 - e / 50 - s / 1000:.5f}"
            for s in range(10, 61, 10)
        ]
        lines.append(f"Validation mel loss: {0.48 - e / 100:.3f}")
    runs = read_logs(_write(tmp_path / "train.log", lines))
    by_metric = {m: r for r in runs for m in r.metrics}
    train, per_epoch = by_metric["Mel Loss"], by_metric["Validation mel loss"]
    assert (train.steps[0], train.steps[-1]) == (10, 3 * 62 + 60)
    assert list(per_epoch.steps) == [1, 2, 3, 4]


def test_a_global_counter_keeps_its_evaluations_on_its_own_axis(tmp_path: Path) -> None:
    lines = []
    for it in range(60, 1201, 60):
        lines.append(f"[TRAIN] epoch: {it // 100}, iter: {it}/30000, loss: {2 - it / 1000:.4f}")
        if it % 300 == 0:
            lines.append(f"[EVAL] #Images: 72, Dice: {0.2 + it / 10000:.4f}, Loss: {1.8 - it / 2000:.4f}")
    runs = read_logs(_write(tmp_path / "train.log", lines))
    (run,) = runs
    assert [float(s) for s in run.steps[run.mask("eval/Dice")]] == [300, 600, 900, 1200]


def test_a_setting_that_names_an_epoch_is_no_axis(tmp_path: Path) -> None:
    lines = ["save_epoch: 1", "num_epoch: 50"]
    lines += [
        f"epoch: {e}, batch: {b}, train loss: {5 / (1 + e + b / 1000):.4f}"
        for e in range(3)
        for b in range(0, 901, 100)
    ]
    (run,) = read_logs(_write(tmp_path / "train.log", lines))
    assert run.step_key == "epoch"
    assert (run.steps[0], run.steps[-1]) == (0, 2)
    assert "save_epoch" not in run.metrics
    assert "batch" not in run.metrics


def test_an_eval_cost_that_climbs_at_the_end_while_the_train_cost_falls_is_overfitting(
    tmp_path: Path,
) -> None:
    dev = [0.693804, 0.469818, 0.402576, 0.434485, 0.413912, 0.468851, 0.517809, 0.622004]
    lines = [f"epoch_id: {e - 1}, dev_cost: {d}" for e, d in enumerate(dev)]
    lines = lines[:1] + [
        x for e in range(7) for x in (f"epoch_id: {e}, train_avg_cost: {0.45 * 0.8**e:.4f}", lines[e + 1])
    ]
    report = analyze(_write(tmp_path / "train.log", lines))
    (over,) = [f for f in report.findings if f.kind == "overfitting"]
    assert (over.metric, over.step) == ("dev_cost", 2)
