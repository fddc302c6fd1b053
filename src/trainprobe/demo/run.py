"""``trainprobe demo``: the seed's story on a laptop CPU, then ``triage`` telling it.

1. A small model trains with the naive background-thread save on (simulated) slow storage: every save stalls
   the loop and writes a torn checkpoint, the loss spikes after saves, and a late corrupt batch blows up the
   optimizer state (an accuracy cliff, NaN/Inf in the next checkpoint). See :mod:`trainprobe.demo.story`
   (and :mod:`trainprobe.demo.race`, the race on its own).
2. ``triage`` diagnoses that run from its own log and checkpoints and writes the HTML report.
3. The same training saved through :class:`trainprobe.save.CheckpointWriter`: no stall, no torn checkpoint;
   only the gradient explosion is left, and triage names the checkpoint to resume from.
4. When ``ssh localhost`` accepts this user's key, the same triage runs through ``--on``.

Each step is a plain function over a :class:`DemoRun`. torch is imported only by the training steps.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainprobe.errors import TrainprobeError, UsageError

# Compressed time: the story's stalls last about a second, so the demo's triage counts gaps from 0.5 s.
STALL_FLOOR_S = 0.5


@dataclass
class DemoRun:
    """What the demo did so far: its directory, a narrative of steps and the results of each."""

    workdir: Path
    quick: bool = False
    remote: bool | None = None
    remote_target: str = "ssh=localhost"
    notify: Callable[[str], None] | None = None
    steps: list[str] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)

    def say(self, line: str) -> None:
        self.steps.append(line)
        if self.notify is not None:
            self.notify(line)

    @property
    def shape(self) -> dict[str, int]:
        """Steps, save interval and the corrupt batch's step: the quick variant is the tests'."""
        if self.quick:
            return {"steps": 200, "save_every": 50, "blowup_at": 180}
        return {"steps": 300, "save_every": 50, "blowup_at": 280}


def _train(run: DemoRun, mode: str) -> None:
    from trainprobe.save.writer import import_torch

    import_torch("the demo's training")  # before anything is written: no torch, no half-made demo
    from trainprobe.demo.story import train_story

    shape = run.shape
    story = train_story(run.workdir / mode, mode=mode, **shape)  # type: ignore[arg-type]
    run.results[f"{mode}_run"] = story
    stalls = sorted(story.stalls)
    line = (
        f"trained {shape['steps']} steps ({story.seconds:.0f} s) saving every {shape['save_every']} steps "
        f"with {'the naive background-thread save' if mode == 'naive' else 'CheckpointWriter'}: "
        f"{len(story.checkpoints)} checkpoints kept, median stall per save {stalls[len(stalls) // 2]:.2f} s; "
        f"a corrupt batch at step {shape['blowup_at']} — log and checkpoints in {run.workdir / mode}"
    )
    run.say(line)


def train_naive(run: DemoRun) -> None:
    _train(run, "naive")


def triage_naive(run: DemoRun) -> None:
    from trainprobe.triage import render_triage_html, triage

    report = triage(str(run.workdir / "naive"), stall_floor_s=STALL_FLOOR_S)
    html = run.workdir / "naive-triage.html"
    html.write_text(render_triage_html(report), encoding="utf-8")
    run.results["naive"] = report
    run.results["naive_html"] = html
    races = [c for c in report.conclusions if c.cause == "save-race"]
    explosions = sum(c.cause == "gradient-explosion" for c in report.conclusions)
    torn = sum(c.verdict == "torn" for c in report.checkpoints)
    run.say(
        f"trainprobe triage {run.workdir / 'naive'}: {sum(len(c.anomalies) for c in races)} anomalies right "
        f"after {len(races)} save(s) that raced training, {explosions} gradient explosion, {torn} of "
        f"{len(report.checkpoints)} checkpoints torn; HTML report: {html}"
    )


def train_writer(run: DemoRun) -> None:
    _train(run, "writer")


def triage_writer(run: DemoRun) -> None:
    from trainprobe.triage import triage

    report = triage(str(run.workdir / "writer"), stall_floor_s=STALL_FLOOR_S)
    run.results["writer"] = report
    torn = sum(c.verdict == "torn" for c in report.checkpoints)
    resume = report.resume_from
    run.say(
        f"trainprobe triage {run.workdir / 'writer'}: {torn} torn checkpoints, "
        f"{sum(c.cause in ('save-race', 'save-stall') for c in report.conclusions)} save problems; "
        "what is left: "
        + (", ".join(c.title for c in report.conclusions) or "nothing")
        + (f"; resume from {resume.relpath} (step {resume.step})" if resume is not None else "")
    )


def ssh_localhost_works() -> bool:
    """Whether ``ssh localhost`` logs in with the user's key, without prompting."""
    if shutil.which("ssh") is None:
        return False
    try:
        proc = subprocess.run(
            ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3", "localhost", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=15,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def triage_remote(run: DemoRun) -> None:
    how = f"trainprobe triage --on ssh=you@host {run.workdir / 'naive'}"
    usable = run.remote if run.remote is not None else ssh_localhost_works()
    if not usable:
        run.say(
            "remote: ssh localhost does not accept your key without a prompt, so the --on step is skipped; "
            f"try it against any machine you can ssh to (only Python and numpy needed there): {how}"
        )
        return
    from trainprobe.triage import triage

    target = run.remote_target
    try:
        report = triage(str(run.workdir / "naive"), on=target, stall_floor_s=STALL_FLOOR_S)
    except TrainprobeError as exc:
        run.say(f"remote: trainprobe triage --on {target} failed: {exc}")
        return
    run.results["remote"] = report
    local = run.results["naive"]
    same = [c.title for c in report.conclusions] == [c.title for c in local.conclusions]
    run.say(
        f"trainprobe triage --on {target} {run.workdir / 'naive'}: the discovery, scans, checks and log "
        f"analysis ran on {report.host} through the remote engine; "
        + ("same conclusions as the local triage" if same else "conclusions differ from the local triage")
    )


STEPS: list[Callable[[DemoRun], None]] = [
    train_naive,
    triage_naive,
    train_writer,
    triage_writer,
    triage_remote,
]


def run_demo(
    workdir: str | None = None,
    *,
    quick: bool = False,
    remote: bool | None = None,
    notify: Callable[[str], None] | None = None,
) -> DemoRun:
    """Run every demo step in ``workdir`` (a fresh temporary directory by default, kept for inspection).
    ``remote``: None tries ``ssh localhost``, False skips it. ``notify`` gets each narrative line as it
    happens."""
    path = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="trainprobe-demo-"))
    path.mkdir(parents=True, exist_ok=True)
    for sub in ("naive", "writer"):
        if (path / sub).exists():
            raise UsageError(
                f"{path / sub} already exists",
                hint="give --dir an empty or new directory; the demo never deletes",
            )
    run = DemoRun(path, quick=quick, remote=remote, notify=notify)
    for step in STEPS:
        step(run)
    return run


def story_found(run: DemoRun) -> bool:
    """Whether triage found, on its own, what the demo planted: saves racing training and a gradient explosion
    in the naive run; no torn checkpoint and only the explosion with CheckpointWriter."""
    naive, writer = run.results.get("naive"), run.results.get("writer")
    if naive is None or writer is None:
        return False
    naive_causes = {c.cause for c in naive.conclusions}
    writer_causes = [c.cause for c in writer.conclusions]
    return (
        {"save-race", "gradient-explosion"} <= naive_causes
        and writer_causes == ["gradient-explosion"]
        and not any(c.verdict == "torn" for c in writer.checkpoints)
        and writer.resume_from is not None
    )
