"""The scanner runs in an interpreter that has no torch (nor typer/rich): a fresh venv with numpy only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

SRC = Path(__file__).resolve().parents[2] / "src"

PROBE = """
import importlib.util, json, sys
assert importlib.util.find_spec("torch") is None, "torch is importable here"
from trainprobe.checkpoint import scan
report = scan(sys.argv[1:], stats=True, verify=True)
print(json.dumps({"report": report.to_json(), "modules": sorted(sys.modules)}))
"""


@pytest.mark.slow
def test_scan_in_a_venv_without_torch(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, symlinks=True)
    py = env_dir / "bin" / "python"
    pip = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", f"numpy=={np.__version__}"], capture_output=True, text=True
    )
    assert pip.returncode == 0, pip.stderr
    assert subprocess.run([str(py), "-c", "import torch"], capture_output=True).returncode != 0

    ckpt = tmp_path / "c.pt"
    torch.save(
        {"w": torch.tensor([1.0, float("nan"), float("inf")]).to(torch.bfloat16), "b": torch.ones(2)}, ckpt
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(SRC)
    proc = subprocess.run([str(py), "-c", PROBE, str(ckpt)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (f,) = out["report"]["files"]
    w = next(t for t in f["tensors"] if t["name"] == "w")
    assert (w["nan"], w["posinf"], w["neginf"]) == (1, 1, 0)
    assert f["problems"] == []
    assert out["report"]["exit_code"] == 1
    loaded = set(out["modules"])
    assert not {"torch", "typer", "rich"} & loaded
    assert not any(m.startswith(("trainprobe.cli", "trainprobe.remote")) for m in loaded)
    assert sys.executable != str(py)
