"""A benchmark log that records durations alone (no loss) is read, and said to hold timings only; a log
whose timings alone were understood while lines that look like metrics were left unread is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainprobe.errors import LogError
from trainprobe.metrics import analyze


def _benchmark(iterations: int) -> str:
    lines = []
    for i in range(iterations):
        lines.append(f"Iteration {i}\n")
        lines.append(f"Forward step time elapsed: {46.2 + 0.1 * (i % 3):.3f}  ms\n")
        lines.append(f"Backward step time elapsed: {149.1 + 0.2 * (i % 2):.3f}  ms\n")
    return "".join(lines)


def test_a_log_of_durations_alone_is_read(tmp_path: Path) -> None:
    log = tmp_path / "bench.log"
    log.write_text(_benchmark(10))
    report = analyze([log])
    (run,) = report.runs
    assert len(run) == 10
    assert run.metrics == []
    assert {run.role(c) for c in run.columns} == {"timing"}
    assert report.exit_code_for("error") == 0


def test_timings_beside_unread_metric_lines_are_not_a_benchmark(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    odd = "".join(
        f"[{i}/100] ~~ loss@train ~~ {2.0 - 0.01 * i:.3f} | acc@val {0.5 + 0.001 * i:.3f}\n"
        for i in range(40)
    )
    log.write_text(_benchmark(5) + odd)
    with pytest.raises(LogError, match="no metric rows found"):
        analyze([log])
