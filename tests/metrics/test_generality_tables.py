"""Issue 24, tables and sentences: a table's rows reach from its last row, not only from its header (a header
printed once over a whole run); a comma-separated table below lines that are not its own (metadata, a banner)
is read by its header; a verb between a name and its value (``loss is 0.12``) names it as a ``:`` would, while
a sentence that mentions a number stays prose."""

from __future__ import annotations

from pathlib import Path

from trainprobe.metrics import read_logs
from trainprobe.metrics.readers.text.fields import read_fields
from trainprobe.metrics.readers.text.rows import why_not_metrics


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_header_printed_once_reads_every_row_under_it(tmp_path: Path) -> None:
    rows = [f"{e:7d}   {2 / e:10.4f}   {2.1 / e:10.4f}   {1.5 + (e % 3) / 10:.4f}" for e in range(1, 60)]
    (run,) = read_logs(_write(tmp_path / "train.log", ["  epoch   train_loss   valid_loss   dur", *rows]))
    assert len(run) == 59
    assert (run.steps[0], run.steps[-1]) == (1, 59)


def test_a_csv_table_below_metadata_lines_is_read(tmp_path: Path) -> None:
    head = ["model,resnet50", "lr,0.1", "", "epoch,train_loss,val_loss"]
    rows = [f"{e},{2 / (e + 1):.4f},{2.2 / (e + 1):.4f}" for e in range(40)]
    (run,) = read_logs(_write(tmp_path / "history.csv", head + rows))
    assert sorted(run.metrics) == ["train_loss", "val_loss"]
    assert (run.steps[0], run.steps[-1]) == (0, 39)


def test_a_verb_between_a_name_and_its_value_names_it() -> None:
    line = "Iteration 7: the loss is 2.5000 and accuracy was 0.125"
    got = read_fields(line)
    assert got.values == {"Iteration": 7, "loss": 2.5, "accuracy": 0.125}
    assert why_not_metrics(got, line) is None


def test_a_sentence_that_mentions_a_number_stays_prose() -> None:
    line = "Training of experiment is done and the best AP is 0.00"
    assert (why_not_metrics(read_fields(line), line) or "").startswith("mostly prose")
