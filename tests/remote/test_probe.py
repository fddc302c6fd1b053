"""``probe`` on the local target; GPUs through a stand-in ``nvidia-smi``.

The stand-in is a fake because this machine has no NVIDIA GPU: a shell script that prints what
``nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu --format=csv,noheader,nounits``
prints on a two-GPU host.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from trainprobe.remote.probe import probe

TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))


def test_probe_reports_gpus_interpreters_and_training_processes(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'echo "0, NVIDIA H100 80GB HBM3, 71234, 81559, 97"\n'
        'echo "1, NVIDIA H100 80GB HBM3, 3, 81559, 0"\n'
    )
    fake.chmod(0o755)
    trainer = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "train.py", "--lr", "3e-4"],
    )
    try:
        report = probe(f"local//env=PATH={fake.parent}:/usr/bin:/bin", cuda=False)
    finally:
        trainer.kill()
        trainer.wait()
    h100 = {"name": "NVIDIA H100 80GB HBM3", "memory_total_mib": "81559"}
    assert report["gpus"] == [
        {"index": "0", **h100, "memory_used_mib": "71234", "utilization_pct": "97"},
        {"index": "1", **h100, "memory_used_mib": "3", "utilization_pct": "0"},
    ]
    assert report["interpreters"]
    assert all(entry.get("version") for entry in report["interpreters"])
    training = [p for p in report["processes"] if p["pid"] == trainer.pid]
    assert training
    assert training[0]["training"] is True
    assert "train.py --lr 3e-4" in training[0]["cmdline"]


def test_cli_probe_json(tmp_path: Path) -> None:
    proc = subprocess.run(
        [TRAINPROBE, "probe", "--json", "--no-cuda", "local"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["target"] == "local"
    assert {"interpreters", "gpus", "disks", "load", "cpus", "memory", "processes", "log_dir"} <= set(
        document
    )
