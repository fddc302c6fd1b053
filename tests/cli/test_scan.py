"""`trainprobe scan` as users run it: exit codes, human output, the JSON schema, discovery of paths."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainprobe.checkpoint import ScanReport

torch = pytest.importorskip("torch")


@pytest.fixture
def run_scan(cli: Any) -> Any:
    return lambda *args: cli("scan", *args)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A training run directory: two clean checkpoints, one with NaN/Inf in AdamW state, logs beside them."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    (tmp_path / "ckpt").mkdir()
    for step in (1, 2):
        torch.save(
            {"model": model.state_dict(), "optimizer": opt.state_dict()}, tmp_path / f"ckpt/step{step}.pt"
        )
    state = opt.state_dict()
    state["state"][0]["exp_avg_sq"][1, 2] = float("inf")
    state["state"][0]["exp_avg_sq"][0, 0] = float("-inf")
    state["state"][1]["exp_avg"][1] = float("nan")
    torch.save({"model": model.state_dict(), "optimizer": state}, tmp_path / "ckpt/step3.pt")
    (tmp_path / "ckpt/train.log").write_text("loss 0.1\n")
    (tmp_path / "ckpt/config.json").write_text("{}")
    return tmp_path / "ckpt"


def test_clean_file_exits_0(run_dir: Path, run_scan: Any) -> None:
    result = run_scan(str(run_dir / "step1.pt"))
    assert result.exit_code == 0, result.output
    assert "✓ clean" in result.stdout
    assert "no NaN or Inf" in result.stdout


def test_directory_scan_names_the_bad_tensors_and_exits_1(run_dir: Path, run_scan: Any) -> None:
    result = run_scan(str(run_dir))
    assert result.exit_code == 1
    out = result.stdout
    assert out.count("✓ clean") == 2
    assert "✗ NON-FINITE" in out
    assert "train.log" not in out
    assert "config.json" not in out
    assert "optimizer.state.0.exp_avg_sq (weight)" in out
    assert "NaN 0 · +Inf 1 · −Inf 1" in out
    assert "first bad at [0, 0]" in out
    assert "optimizer.state.1.exp_avg (bias)" in out
    assert "3 non-finite values in 2 tensor(s) (NaN 1, +Inf 1, −Inf 1)" in out.replace("\n", " ")


def test_json_schema(run_dir: Path, run_scan: Any) -> None:
    result = run_scan(str(run_dir / "step3.pt"), str(run_dir / "missing.pt"), "--json", "--stats")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["schema_version"] == 3
    assert data["exit_code"] == 1
    assert data["verdict"] == "nonfinite"
    assert data["options"] == {"stats": True, "verify": False}
    assert set(data["totals"]) == {
        "units",
        "units_unreadable",
        "files",
        "files_unreadable",
        "tensors",
        "parameters",
        "bytes",
        "nonfinite",
        "nan",
        "posinf",
        "neginf",
        "bad_tensors",
        "seconds",
    }
    assert (data["totals"]["nan"], data["totals"]["posinf"], data["totals"]["neginf"]) == (1, 1, 1)
    (bad,) = data["files"]
    missing = data["units"][1]
    assert set(bad) == {
        "path", "unit", "role", "format", "verdict", "error", "totals", "notes", "problems", "tensors"
    }  # fmt: skip
    assert [u["verdict"] for u in data["units"]] == ["nonfinite", "unreadable"]
    assert missing["verdict"] == "unreadable"
    assert missing["problem"] == "no such file or directory"
    tensor = next(t for t in bad["tensors"] if t["name"] == "optimizer.state.0.exp_avg_sq")
    assert tensor == {
        "name": "optimizer.state.0.exp_avg_sq",
        "param_name": "weight",
        "role": "optimizer",
        "dtype": "float32",
        "shape": [2, 3],
        "numel": 6,
        "bytes": 24,
        "nan": 0,
        "posinf": 1,
        "neginf": 1,
        "first_bad_index": [0, 0],
        "fingerprint": tensor["fingerprint"],
        "file": None,  # the data file holding it, where that is not the part (a DCP rank file)
        "stats": tensor["stats"],
        "error": None,
    }
    assert set(tensor["stats"]) == {"min", "max", "mean", "std", "absmax", "l2", "zero_fraction"}
    assert ScanReport.from_json(data).to_json() == data  # what `scan --on` rebuilds locally


def test_unreadable_only_exits_2_with_one_clear_line(tmp_path: Path, run_scan: Any) -> None:
    bad = tmp_path / "broken.pt"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    result = run_scan(str(bad))
    assert result.exit_code == 1  # damaged is a finding; only what cannot be judged exits 2
    assert f"✗ CORRUPT  {bad}  not a complete zip archive" in result.stdout.replace("\n", "")


def test_glob_and_no_match(run_dir: Path, run_scan: Any) -> None:
    result = run_scan(str(run_dir / "step[12].pt"), "--json")
    assert result.exit_code == 0
    assert [Path(f["path"]).name for f in json.loads(result.stdout)["files"]] == ["step1.pt", "step2.pt"]
    result = run_scan(str(run_dir / "*.safetensors"), "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["units"][0]["problem"] == "no file matches this pattern"


def test_verify_and_stats_in_human_output(run_dir: Path, run_scan: Any) -> None:
    result = run_scan(str(run_dir / "step1.pt"), "--verify", "--stats")
    assert result.exit_code == 0
    assert "absmax" in result.stdout
    assert "model.weight" in result.stdout


def test_on_without_remote_support_is_a_usage_error(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, run_scan: Any
) -> None:
    for name in ("trainprobe.tasks", "trainprobe.tasks.checkpoints"):
        monkeypatch.setitem(sys.modules, name, None)  # makes the import fail
    result = run_scan(str(run_dir), "--on", "user@host")
    assert result.exit_code == 2
    assert "remote work (--on) is not available in this installation" in result.stderr


def test_no_arguments_is_a_usage_error(run_scan: Any) -> None:
    assert run_scan().exit_code == 2


def test_real_program_quiet(run_dir: Path) -> None:
    exe = Path(sys.executable).with_name("trainprobe")
    proc = subprocess.run([str(exe), "scan", "-q", str(run_dir)], capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr == ""
