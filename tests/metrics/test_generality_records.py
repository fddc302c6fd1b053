"""Issue 24, records in shapes of their own: a table of ``| key | value |`` lines between rules is one row
(its section lines name the keys under them); of two counters that step by a stride beside an epoch,
neither is the axis (the unit is open), and the epoch stays it."""

from __future__ import annotations

import time
from pathlib import Path

from trainprobe.metrics import analyze, read_logs


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _table(cells: list[tuple[str, str]]) -> list[str]:
    rule = "-" * 40
    return [rule, *(f"| {k:<22} | {v:<12} |" for k, v in cells), rule]


def test_a_table_of_keys_and_values_with_sections_is_one_row(tmp_path: Path) -> None:
    lines = ["Using cuda device"]
    for i in range(1, 25):
        lines += _table(
            [
                ("rollout/", ""),
                ("   ep_rew_mean", f"{-200 + 7 * i + (i % 3) * 4:.4g}"),
                ("train/", ""),
                ("   loss", f"{1 / i + (i % 2) * 0.01:.4g}"),
                ("   n_updates", str(10 * i)),
            ]
        )
    (run,) = read_logs(_write(tmp_path / "train.log", lines))
    assert len(run) == 24
    assert {"rollout/ep_rew_mean", "train/loss"} <= set(run.metrics)
    assert run.step_key == "train/n_updates"
    assert (run.steps[0], run.steps[-1]) == (10, 240)


def test_tables_printed_back_to_back_are_rows_of_their_own(tmp_path: Path) -> None:
    lines: list[str] = []
    for e in range(12):
        cells = [("epoch", str(e)), ("test/success_rate", f"{e / 12:.3f}"), ("test/q", f"{-e / 3:.3f}")]
        table = _table(cells)
        lines += table if e == 0 else table[1:]  # one rule between two tables
    (run,) = read_logs(_write(tmp_path / "progress.txt", lines))
    assert run.step_key == "epoch"
    assert len(run) == 12
    assert run.columns["test/success_rate"][-1] == float(f"{11 / 12:.3f}")


def test_a_line_of_fields_between_bars_is_no_table(tmp_path: Path) -> None:
    lines = [f"| epoch {e:03d} | loss {3 / (e + 1):.3f} | lr 0.001 |" for e in range(1, 20)]
    (run,) = read_logs(_write(tmp_path / "train.log", lines))
    assert run.step_key == "epoch"
    assert "loss" in run.metrics


def test_two_counters_by_stride_beside_an_epoch_leave_the_epoch_the_axis(tmp_path: Path) -> None:
    rows = ["epoch\tepisodes_a\tepisodes_b\tscore"]
    rows += [f"{e}\t{20 * (e + 1)}\t{100 * (e + 1)}\t{e / 40 + (e % 3) / 100:.3f}" for e in range(40)]
    report = analyze(_write(tmp_path / "progress.txt", rows))
    (run,) = report.runs
    assert run.step_key == "epoch"
    assert (run.steps[0], run.steps[-1]) == (0, 39)


def test_a_long_line_of_bars_and_spaces_costs_one_pass(tmp_path: Path) -> None:
    """A table line is split, not matched by a pattern that tries every way to share its spaces out."""
    gap = " " * 30000
    lines = [f"| a{gap}| 1{gap}| x", f"|{gap}{gap}|", "| loss | 0.5 |"] * 20
    start = time.perf_counter()
    read_logs(_write(tmp_path / "hostile.log", lines))
    assert time.perf_counter() - start < 5
