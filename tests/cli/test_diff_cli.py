"""`trainprobe diff` as a user runs it: real process, real torch-written files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def _trainprobe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainprobe", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_diff_human_and_json(tmp_path: Path) -> None:
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    torch.save({"layer.weight": torch.ones(4, 4), "layer.bias": torch.zeros(4), "old": torch.ones(1)}, a)
    torch.save(
        {"layer.weight": torch.full((4, 4), 1.5), "layer.bias": torch.zeros(4), "new": torch.ones(1)}, b
    )
    proc = subprocess.run(
        [sys.executable, "-m", "trainprobe", "diff", str(a), str(b)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "layer.weight" in proc.stdout
    assert "0.5" in proc.stdout  # rel change ||A-B||/||A|| = 0.5
    assert "1 changed, 1 identical, 1 removed, 1 added" in proc.stdout
    report = json.loads(_trainprobe("diff", "--json", str(a), str(b)).stdout)
    assert report["schema_version"] == 3
    weight = next(t for t in report["tensors"] if t["name"] == "layer.weight")
    assert weight["rel_change"] == pytest.approx(0.5)
    assert weight["max_abs_diff"] == pytest.approx(0.5)
    assert report["summary"] == {"changed": 1, "identical": 1, "removed": 1, "added": 1}


def test_diff_unreadable_exits_2(tmp_path: Path) -> None:
    a = tmp_path / "a.pt"
    torch.save({"w": torch.ones(2)}, a)
    proc = _trainprobe("diff", str(a), str(tmp_path / "nope.pt"))
    assert proc.returncode == 2
    assert "nope.pt" in proc.stderr
