"""What a log may be called is one rule (trainprobe.conventions): ``logs DIR`` and ``triage DIR`` read the
same files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def test_logs_and_triage_read_the_same_log_files(tmp_path: Path) -> None:
    """One rule for what a log may be called: ``logs DIR`` and ``triage DIR`` read the same files (no hidden
    file, config or writer's manifest; notes in Markdown, as logs reads them)."""
    rows = "".join(f"step {s} loss {1 + s / 100:.3f}\n" for s in range(50))
    (tmp_path / "sub").mkdir()
    for name in ("train.log", "notes.md", "run.out", "sub/eval.txt", ".hidden.log"):
        (tmp_path / name).write_text(rows)
    (tmp_path / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "loss": 1 + s / 100}) + "\n" for s in range(50))
    )
    for name in ("config.json", "step-00000100.pt.manifest.json"):
        (tmp_path / name).write_text(json.dumps({"step": 100, "loss": 2.0}))
    expected = ["metrics.jsonl", "notes.md", "run.out", os.path.join("sub", "eval.txt"), "train.log"]
    logs = cli_json("logs", str(tmp_path), "--json")
    assert sorted(os.path.relpath(r["path"], tmp_path) for r in logs["runs"]) == expected
    triaged = cli_json("triage", str(tmp_path), "--json")
    assert sorted(os.path.relpath(p, tmp_path) for p in triaged["log_files"]) == expected


def cli_json(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "trainprobe", *args], capture_output=True, text=True, check=False
    )
    assert proc.returncode in (0, 1), proc.stderr
    document: dict[str, Any] = json.loads(proc.stdout)
    return document
