"""SIGKILL a training process in the middle of a checkpoint write: what was there before stays valid."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from trainprobe.save import CheckpointWriter  # noqa: E402
from trainprobe.save.files import manifest_path, read_latest  # noqa: E402

# Saves step 1 and waits for it, then keeps saving ~64 MB checkpoints so a write is always in progress.
CHILD = """
import sys, torch
from trainprobe.save import CheckpointWriter
writer = CheckpointWriter(sys.argv[1], keep=None)
state = {"w%d" % i: torch.full((1024, 1024), float(i)) for i in range(16)}
writer.save(1, model=state)
writer.wait()
print("first saved", flush=True)
step = 1
while True:
    step += 1
    for t in state.values():
        t.add_(1.0)
    writer.save(step, model=state)
"""


def _temp_files(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.name.startswith(".") and ".tmp-" in p.name]


@pytest.mark.slow
def test_sigkill_mid_write_leaves_previous_checkpoint_and_latest_valid(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "first saved"
        deadline = time.monotonic() + 60
        # Kill while a temp file is being filled, well after the write has started.
        while time.monotonic() < deadline:
            temps = _temp_files(tmp_path)
            if any(p.stat().st_size > (4 << 20) for p in temps if p.exists()):
                break
            time.sleep(0.001)  # polling interval: waiting for a temp file past 4 MiB
        else:
            pytest.fail("never caught the writer mid-write")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert _temp_files(tmp_path), "the kill should have interrupted a write"

    latest = read_latest(tmp_path)
    assert latest is not None
    assert latest.exists()
    manifest = json.loads(manifest_path(latest).read_text())
    assert manifest["sha256"] == hashlib.sha256(latest.read_bytes()).hexdigest()
    loaded = torch.load(latest, weights_only=True)
    assert loaded["step"] == manifest["step"]
    # Every tensor comes from the same step: w_i == i + step - 1 everywhere.
    for i in range(16):
        assert torch.equal(loaded["model"][f"w{i}"], torch.full((1024, 1024), float(i + loaded["step"] - 1)))
    # Every checkpoint that has a manifest is complete and matches it.
    for path in tmp_path.glob("step-*.pt"):
        if manifest_path(path).exists():
            want = json.loads(manifest_path(path).read_text())["sha256"]
            assert hashlib.sha256(path.read_bytes()).hexdigest() == want

    # The next writer in that directory cleans the dead process's temp file up.
    CheckpointWriter(tmp_path).close()
    assert _temp_files(tmp_path) == []
