"""`trainprobe demo`: the seed's story trained for real, and triage finding it on its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainprobe.cli import app

pytest.importorskip("torch")


@pytest.mark.slow
def test_demo_tells_the_story(tmp_path: Path) -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["demo", "--dir", str(tmp_path), "--quick", "--no-remote"]
    )
    assert result.exit_code == 0, result.output
    out = re.sub(r"\s+", " ", result.stdout)
    assert "with the naive background-thread save: 4 checkpoints" in out
    assert re.search(r"\d spike\(s\) traced to saves that raced training, 1 gradient explosion", out)
    assert re.search(r"[1-4] of 4 checkpoints torn", out)
    assert "with CheckpointWriter: 4 checkpoints" in out
    assert "0 torn checkpoints, 0 save problems; what is left: a gradient explosion at step 180" in out
    assert "resume from ckpt/step-00000150.pt (step 150)" in out
    assert "the --on step is skipped" in out
    assert "trainprobe triage --on ssh=you@host" in out
    assert "raced training (high confidence)" in out
    assert f"HTML report: {tmp_path / 'naive-triage.html'}" in out
    assert (tmp_path / "naive-triage.html").stat().st_size > 10_000
    assert sorted(p.name for p in (tmp_path / "naive" / "ckpt").iterdir()) == [
        f"step-{s:08d}.pt" for s in (50, 100, 150, 200)
    ]
    assert (tmp_path / "naive" / "train.log").read_text().count("Saving checkpoint") == 4
