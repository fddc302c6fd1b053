"""The demo's story is a function of steps, not of the clock: the same on every run, however busy the CPU.

The runs here happen while busy processes spin on the cores (:func:`cpu_hog`), as on a laptop that also
compiles something or a CI machine shared with other jobs: that is where a story staged in wall-clock time
used to change (fewer spikes after saves, a divergence instead)."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainprobe.demo import DemoRun, planted_story, run_demo, story_found, told_story

#: one busy process: spins until killed, or until its parent (this test's process) is gone, so that even a
#: pytest killed with SIGKILL leaves none spinning
_SPIN = """
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(200000):
        pass
"""


@pytest.fixture
def cpu_hog() -> Iterator[int]:
    """Two busy processes (the brief's `for i in 1 2; do (while :; do :; done) & done`) for the test's
    duration, killed by their own pid afterwards."""
    procs = [subprocess.Popen([sys.executable, "-c", _SPIN, str(os.getpid())]) for _ in range(2)]
    try:
        yield len(procs)
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def test_the_planted_story_follows_from_the_steps_alone() -> None:
    quick = planted_story({"steps": 200, "save_every": 50, "blowup_at": 180})
    assert quick == {
        "naive_saves": [50, 100, 150, 200],
        "naive_torn": [50, 100, 150],
        "naive_raced_saves": [50, 100, 150],
        "naive_stalled_saves": [50, 100, 150],
        "naive_spikes_after_stalls": [51, 101, 151],
        "naive_explosions": [180],
        "naive_other_causes": [],
        "writer_torn": [],
        "writer_causes": [("gradient-explosion", 180)],
        "writer_resume_from": 150,
    }
    full = planted_story(DemoRun(Path("."), quick=False).shape)
    assert full["naive_torn"] == [50, 100, 150, 200, 250]
    assert full["naive_spikes_after_stalls"] == [51, 101, 151, 201, 251]
    assert full["writer_resume_from"] == 250


def _fingerprint(run_dir: Path) -> tuple[str, dict[str, str]]:
    """The log without its timestamps' base (the simulated clock starts at the real time of day) and the
    sha256 of each checkpoint file: what the run wrote, byte for byte."""
    lines = (run_dir / "train.log").read_text(encoding="utf-8").splitlines()
    stamps = [re.match(r"^(\S+) ", line) for line in lines]
    assert all(stamps), lines[:3]
    from datetime import datetime

    times = [datetime.fromisoformat(m.group(1)) for m in stamps if m is not None]
    offsets = [round((t - times[0]).total_seconds() * 1000) for t in times]
    body = "\n".join(f"+{ms} {line.split(' ', 1)[1]}" for ms, line in zip(offsets, lines, strict=True))
    ckpts = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((run_dir / "ckpt").glob("*.pt"))
    }
    return body, ckpts


@pytest.mark.slow
@pytest.mark.timing
def test_the_story_is_byte_identical_twice_on_a_busy_cpu(tmp_path: Path, cpu_hog: int) -> None:
    """Each mode trained twice under load: the same log (step lines and their simulated times) and the same
    checkpoint bytes, torn ones included (the tear is gated by events, not by a race against the clock)."""
    pytest.importorskip("torch")
    from trainprobe.demo.story import train_story

    for mode in ("naive", "writer"):
        first, second = (
            train_story(tmp_path / f"{mode}-{i}", mode=mode, steps=120, save_every=50, blowup_at=None)
            for i in (1, 2)
        )
        assert first.stalls == second.stalls == ([2.0, 2.0] if mode == "naive" else [0.001, 0.001])
        a, b = _fingerprint(tmp_path / f"{mode}-1"), _fingerprint(tmp_path / f"{mode}-2")
        assert a[0] == b[0]
        assert a[1] == b[1]
        assert "+1000 step 50 |" in a[0]  # 50 steps of 20 ms
        if mode == "naive":
            assert "+3020 step 51 |" in a[0]  # then the 2 s stall, then one step


def _story_line(line: str) -> str:
    """A narrative line without what may differ between runs: real seconds and the temporary directory."""
    return re.sub(r"in \d+ s,", "in N s,", line.replace(os.sep.join(("", "tmp")), "/tmp"))


@pytest.mark.slow
@pytest.mark.timing
def test_the_demo_tells_the_same_story_twice_on_a_busy_cpu(tmp_path: Path, cpu_hog: int) -> None:
    """The whole quick demo, twice, while the CPU is busy: the same counts and steps, and exactly the story
    that was planted."""
    pytest.importorskip("torch")
    runs: list[DemoRun] = []
    for i in (1, 2):
        runs.append(run_demo(str(tmp_path / str(i)), quick=True, remote=False))
    stories: list[dict[str, Any]] = [told_story(r) for r in runs]
    assert stories[0] == stories[1] == planted_story(runs[0].shape)
    assert all(story_found(r) for r in runs)
    lines = [[_story_line(s.replace(str(r.workdir), "DIR")) for s in r.steps] for r in runs]
    assert lines[0] == lines[1]
    # Two findings per naive save, joined by time: the stall the spike followed, and the torn file.
    assert (
        "3 anomalies right after 3 save(s) that blocked the loop, 3 of 4 checkpoints torn by saves that "
        "raced training (a separate finding: the live run never read them back), 1 gradient explosion"
    ) in lines[0][1]


def test_a_save_slowed_after_its_tear_writes_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A naive save that is slow to write its second half (a descheduled thread on a busy machine) holds the
    same bytes: exactly one step tears it, and the loop waits for the rest before the next step."""
    pytest.importorskip("torch")
    import time

    from trainprobe.demo import race
    from trainprobe.demo.story import train_story

    def story(name: str) -> dict[str, str]:
        train_story(tmp_path / name, mode="naive", steps=60, save_every=50, blowup_at=None)
        return _fingerprint(tmp_path / name)[1]

    quick = story("quick")
    plain_write = race.TearGate.write

    def slow_after_the_tear(gate: race.TearGate, data: bytes) -> int:
        if gate.stepped.is_set():
            time.sleep(0.002)  # the steps after the tear would run meanwhile, were they not held
        return plain_write(gate, data)

    monkeypatch.setattr(race.TearGate, "write", slow_after_the_tear)
    assert story("slow") == quick
