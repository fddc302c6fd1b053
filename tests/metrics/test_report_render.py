"""The report's run header (trainprobe.cli.logs.render_report): metrics named apart from counters and
timings, side runs listed as runs of their own."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from trainprobe.cli.logs import render_report
from trainprobe.metrics import analyze


def _render(path: Path) -> str:
    console = Console(record=True, width=200, color_system=None)
    render_report(analyze([path]), console)
    return console.export_text()


def test_counters_and_timings_are_named_apart_from_the_metrics(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(
        "".join(
            f"epoch {1 + i // 50} | step {i} | loss {2.0 - i / 1000:.4f} | tokens {i * 4096} | step_time 1s\n"
            for i in range(200)
        )
    )
    (header, *_) = _render(log).splitlines()
    assert header.startswith("train (text, 200 rows, steps 0–199 by step, no wall clock): loss; ")
    assert "counters epoch, tokens" in header
    assert "timings step_time" in header


def test_an_eval_loop_on_epochs_is_a_run_of_its_own(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    lines = []
    for epoch in range(1, 6):
        for it in range(10, 60, 10):
            loss = 2.0 / (epoch + it / 50)
            lines.append(f"Epoch(train) [{epoch}][{it}/50]  lr: 1.0000e-02  eta: 0:00:10  loss: {loss:.4f}\n")
        lines.append(f"Epoch(val) [{epoch}][7/7]  accuracy/top1: {50 + epoch * 5:.4f}\n")
    log.write_text("".join(lines))
    out = _render(log).splitlines()
    # a constant learning rate is a setting (a counter), not a series to watch
    assert (
        out[0]
        == "train (text, 25 rows, steps 10–250, no wall clock): train/loss; counters Epoch(train), train/lr"
    )
    assert (
        out[1] == "train (eval) (text, 5 rows, steps 1–5 by Epoch(val), no wall clock): eval/accuracy/top1; "
        "counters Epoch(val)"
    )
    assert out[2] == "no findings: the log looks healthy"
