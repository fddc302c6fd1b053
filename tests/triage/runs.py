"""Real run directories for the triage tests, trained once per test session with real torch.

Each is built by :func:`trainprobe.demo.story.train_story` (the demo's training) in a directory the ssh test
users can read, and removed when the session ends."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

STEPS, SAVE_EVERY, BLOWUP = 200, 50, 180
STALL_FLOOR = 0.5  # the story's stalls are compressed to about a second


def _readable(root: Path) -> None:
    root.chmod(0o755)
    for folder, dirs, files in os.walk(root):
        for d in dirs:
            os.chmod(os.path.join(folder, d), 0o755)
        for f in files:
            os.chmod(os.path.join(folder, f), 0o644)


@functools.cache
def story_run(mode: str, blowup: bool) -> Path:
    """A run dir: ``mode`` "naive" (torn saves that stall) or "writer" (CheckpointWriter); ``blowup``: the
    corrupt batch at step 180."""
    pytest.importorskip("torch")
    from trainprobe.demo.story import train_story

    root = Path(tempfile.mkdtemp(prefix=f"tp-triage-{mode}-"))
    atexit.register(shutil.rmtree, root, True)
    train_story(
        root / "run",
        mode=mode,
        steps=STEPS,
        save_every=SAVE_EVERY,
        blowup_at=BLOWUP if blowup else None,  # type: ignore[arg-type]
    )
    _readable(root)
    return root / "run"
