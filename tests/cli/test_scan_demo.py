"""`trainprobe demo`: trains, explodes, and scan finds the planted NaN/Inf in the optimizer state."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainprobe.cli import app

pytest.importorskip("torch")


def test_demo_finds_the_exploded_optimizer_state(tmp_path: Path) -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["demo", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "step 30 exploded" in out
    assert "✗ NON-FINITE" in out
    assert f"{tmp_path}/step_0030.pt" in out
    assert "optimizer_state_dict.state.2.exp_avg_sq (2.weight)" in out
    assert "model_state_dict.2.weight" in out  # the update Inf/sqrt(Inf) turned the weights NaN
    assert out.count("✓ clean") == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_0010.pt", "step_0020.pt", "step_0030.pt"]
