"""``tail_on``: a log's last lines read where the log is (what the MCP tool ``watch_tail`` does), through the
real remote engine on this machine: the document a local ``tail_findings`` gives, and a far-side LogError as
that error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainprobe.errors import LogError
from trainprobe.metrics.follow import tail_findings
from trainprobe.tasks.tail import tail_on

HERE = f"local//python={sys.executable}"


def test_tail_on_is_the_local_tail_findings(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(
        "".join(f"step: {i}  loss: {9.5 if i == 120 else 2.0 - 0.002 * i:.4f}\n" for i in range(200))
    )
    document = tail_on(HERE, log, lines=150, since_step=100, timeout=120)
    assert document == tail_findings(str(log), lines=150, since_step=100)
    assert [(f["kind"], f["step"]) for f in document["findings"]] == [("spike", 120)]


def test_a_missing_log_is_the_far_sides_log_error(tmp_path: Path) -> None:
    with pytest.raises(LogError, match=r"gone\.log: no such file or directory"):
        tail_on(HERE, tmp_path / "gone.log", timeout=120)
