"""`trainprobe check` as a user runs it: real process, real torch-written files, exit codes and JSON."""

from __future__ import annotations

import copy
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


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("check-cli")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step() -> None:
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()
    paths = {name: root / f"{name}.pt" for name in ("good", "torn", "weights")}
    torch.save({"step": 1, "model": model.state_dict(), "optimizer": opt.state_dict()}, paths["good"])
    old = copy.deepcopy(opt.state_dict())
    step()
    mixed = opt.state_dict()
    mixed["state"][0] = old["state"][0]
    torch.save({"step": 2, "model": model.state_dict(), "optimizer": mixed}, paths["torn"])
    torch.save(model.state_dict(), paths["weights"])
    paths["junk"] = root / "junk.pt"
    paths["junk"].write_text("hello")
    return paths


def test_consistent_exits_0(checkpoints: dict[str, Path]) -> None:
    proc = _trainprobe("check", str(checkpoints["good"]))
    assert proc.returncode == 0, proc.stderr
    assert "✓ consistent" in proc.stdout
    assert "all 4 step counters equal (1 = the checkpoint's step 1)" in proc.stdout


def test_torn_exits_1_with_evidence(checkpoints: dict[str, Path]) -> None:
    proc = _trainprobe("check", str(checkpoints["good"]), str(checkpoints["torn"]))
    assert proc.returncode == 1
    assert "✗ TORN" in proc.stdout
    assert "FAIL step-counters" in proc.stdout
    assert "2 checkpoint(s): 1 consistent, 1 torn" in proc.stdout


def test_json_report(checkpoints: dict[str, Path]) -> None:
    proc = _trainprobe("check", "--json", str(checkpoints["torn"]))
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["schema_version"] == 3
    assert report["exit_code"] == 1
    (result,) = report["units"]
    assert result["verdict"] == "torn"
    fails = [e for e in result["evidence"] if e["outcome"] == "fail"]
    assert fails[0]["check"] == "step-counters"
    assert fails[0]["indicates"] == "torn"
    assert fails[0]["values"]["counters"] == {"2": 3, "1": 1}


def test_unknown_exits_0_unless_strict(checkpoints: dict[str, Path]) -> None:
    proc = _trainprobe("check", str(checkpoints["weights"]))
    assert proc.returncode == 0
    assert "? unknown" in proc.stdout
    assert _trainprobe("check", "--strict", "-q", str(checkpoints["weights"])).returncode == 1


def test_unreadable_exits_2(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    proc = _trainprobe("check", str(checkpoints["junk"]))
    assert proc.returncode == 2
    assert "unreadable" in proc.stdout
    proc = _trainprobe("check", str(tmp_path / "missing.pt"))
    assert proc.returncode == 2
    assert "no such file or directory" in proc.stdout


def test_help_teaches() -> None:
    proc = _trainprobe("check", "--help")
    assert proc.returncode == 0
    assert "Exit codes" in proc.stdout
    assert "--on" in proc.stdout
