"""`trainprobe.demo.race.train` through CheckpointWriter, default and overlapped: what the benchmark runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainprobe.checkpoint.check import check_path
from trainprobe.demo.race import train


@pytest.mark.parametrize("mode", ["writer", "writer-overlap"])
def test_writer_modes_save_consistent_checkpoints_and_account_every_stall(tmp_path: Path, mode: str) -> None:
    run = train(tmp_path, steps=20, save_every=5, mode=mode, layers=4, width=16)  # type: ignore[arg-type]
    assert [p.name for p in run.checkpoints] == [f"step-{s:08d}.pt" for s in (5, 10, 15, 20)]
    assert len(run.stalls) == 4
    assert all(stall >= 0 for stall in run.stalls)
    assert run.loop_seconds >= sum(run.step_seconds)
    assert [check_path(str(p)).verdict for p in run.checkpoints] == ["consistent"] * 4
