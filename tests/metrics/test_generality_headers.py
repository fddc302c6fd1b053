"""Issue 24, tables whose header takes two lines (Vowpal Wabbit's progressive-validation table): the names
read downwards, a trailing row tag that names a held-out split makes the row's fields eval fields, a line of
prose that reads as names between two rows does not end the table, and a line that reports a NaN is a
finding on the metric it names."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainprobe.metrics import analyze, read_logs
from trainprobe.metrics.findings import NON_FINITE

HEADER = [
    "average  since         example        example  current  current  current",
    "loss     last          counter         weight    label  predict features",
]


def _row(loss: float, counter: int, tag: str = "") -> str:
    predict = (counter % 7) / 7
    return f"{loss:.6f} {loss * 0.9:.6f} {counter:12d} {counter:14.1f}   1.0000   {predict:.4f}       51{tag}"


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_header_over_two_lines_names_its_columns_downwards(tmp_path: Path) -> None:
    rows = [_row(1 / (i + 1), 2**i) for i in range(8)]
    (run,) = read_logs(
        _write(tmp_path / "vw.stderr", ["Num weight bits = 18", *HEADER, *rows, "", "finished run"])
    )
    assert "average loss" in run.metrics
    assert "since last" in run.metrics
    assert (run.steps[0], run.steps[-1]) == (1, 128)  # the example counter is the step
    # one example's label and feature count, and the weight of the examples seen, are no metrics
    assert not {"current label", "current features", "example weight"} & set(run.metrics)


def test_the_same_header_printed_twice_is_one_header(tmp_path: Path) -> None:
    head = "  epoch   train_loss   valid_loss   lr"
    rows = [f"{e:7d}   {2 / e:10.4f}   {2.1 / e:10.4f}   0.1" for e in range(1, 20)]
    (run,) = read_logs(_write(tmp_path / "train.log", [head, head, *rows]))
    assert {"train_loss", "valid_loss"} <= set(run.metrics)
    assert len(run) == 19


def test_rows_tagged_as_held_out_are_eval_rows(tmp_path: Path) -> None:
    train = [_row(1 / (i + 1), 2**i) for i in range(4)]
    held_out = [_row(0.2 / (i + 1), 2 ** (i + 4), " h") for i in range(4)]
    (run,) = read_logs(_write(tmp_path / "vw.stderr", [*HEADER, *train, *held_out]))
    assert int(np.isfinite(run.columns["average loss"]).sum()) == 4
    assert int(np.isfinite(run.columns["eval/average loss"]).sum()) == 4
    assert (run.steps[0], run.steps[-1]) == (1, 128)


def test_prose_between_rows_does_not_end_the_table(tmp_path: Path) -> None:
    lines = [*HEADER]
    for i in range(3):
        lines += ["NAN prediction in example 1, forcing 0", "your features have too much magnitude"]
        lines.append(_row(1.0, 2**i))
    (run,) = read_logs(_write(tmp_path / "vw.stderr", lines))
    assert len(run) == 3
    assert (run.steps[0], run.steps[-1]) == (1, 4)


def test_a_line_that_reports_a_nan_is_a_finding_on_the_metric_it_names(tmp_path: Path) -> None:
    lines = [*HEADER, _row(1.0, 1), "NAN prediction in example 2, forcing 0", _row(1.0, 2), _row(1.0, 4)]
    report = analyze([str(_write(tmp_path / "vw.stderr", lines))])
    (nan,) = [f for f in report.findings if f.kind == NON_FINITE]
    assert nan.metric == "current predict"
    assert nan.severity == "error"
    assert nan.message.count("NAN prediction") == 1
    assert "the non-finite value the log reports" not in nan.message  # its own line, not an event before it
