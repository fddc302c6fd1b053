"""Real run directories for the triage tests, trained once per test session with real torch.

Each is built by :func:`trainprobe.demo.story.train_story` (the demo's training) in a directory the ssh test
users can read, and removed when the session ends."""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

STEPS, SAVE_EVERY, BLOWUP = 200, 50, 180
STALL_FLOOR = 0.5  # the story's stalls are compressed to 2 s on its simulated clock (steps: 20 ms)


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


def _race_train() -> Any:
    from trainprobe.demo.race import train

    return train


SEED_STEPS, SEED_EVERY, SEED_BLOWUP = 60, 10, 45
SEED_TORN = (10, 30)  # the saves a step lands in (the race tears each one it is told to)
SEED_LOG_PATH = "/scratch/exp3/checkpoints"  # where the log says it saved: the run dir was copied since
_RACE_LINE = re.compile(r"^(\S+ \S+) INFO (.*)$")


@functools.cache
def seed_run() -> Path:
    """The seed's situation: ``train.log`` in Python-logging shape (``2026-01-01 12:00:00,123 - INFO - step 10
    loss 0.48 ...``) whose save lines name ``/scratch/exp3/checkpoints/step_N`` (the run was copied from
    there), and per-step folders ``checkpoints/step_N/state.pt`` written by the real race (torch.save from a
    background thread while training goes on; a step lands in the writes of steps 10 and 30, which tear, the
    others finish first). A learning rate of 1e30 at step 45 blows the run up (NaN from step 46).
    ``checkpoints/best/`` is a byte copy of ``step_30``; the step-20 save sits in ``step_25/`` (its step field
    says 20, its folder 25)."""
    pytest.importorskip("torch")
    root = Path(tempfile.mkdtemp(prefix="tp-triage-seed-"))
    atexit.register(shutil.rmtree, root, True)
    work, run = root / "race", root / "run"
    _race_train()(
        work, steps=SEED_STEPS, save_every=SEED_EVERY, mode="background", log_path=work / "race.log",
        lr_at=lambda s: 1e30 if s == SEED_BLOWUP else 1e-3, torn=lambda s: s in SEED_TORN,
    )  # fmt: skip
    lines = []
    for line in (work / "race.log").read_text().splitlines():
        m = _RACE_LINE.match(line)
        assert m, line
        stamp, rest = m.groups()
        saved = re.match(r"Saving checkpoint to \S+ \(step=(\d+)\)", rest)
        if saved:
            rest = f"Saving checkpoint to {SEED_LOG_PATH}/step_{saved.group(1)} (step {saved.group(1)})"
        else:
            rest = re.sub(r"(\w+)=(\S+)", r"\1 \2", rest)
        lines.append(f"{stamp} - INFO - {rest}")
    run.mkdir()
    (run / "train.log").write_text("\n".join(lines) + "\n")
    for step in range(SEED_EVERY, SEED_STEPS + 1, SEED_EVERY):
        folder = run / "checkpoints" / f"step_{25 if step == 20 else step}"
        folder.mkdir(parents=True)
        shutil.move(str(work / "ckpt" / f"step-{step:08d}.pt"), folder / "state.pt")
    (run / "checkpoints" / "best").mkdir()
    shutil.copy2(run / "checkpoints" / "step_30" / "state.pt", run / "checkpoints" / "best" / "state.pt")
    shutil.rmtree(work)
    _readable(root)
    return run
