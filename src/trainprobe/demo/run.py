"""``trainprobe demo``: the seed's story on a laptop CPU, then ``triage`` telling it.

1. A small model trains with the naive background-thread save on (simulated) slow storage: every save stalls
   the loop and writes a torn checkpoint, the loss spikes after saves, and a late corrupt batch blows up the
   optimizer state (an accuracy cliff, NaN/Inf in the next checkpoint). See :mod:`trainprobe.demo.story`
   (and :mod:`trainprobe.demo.race`, the race on its own).
2. ``triage`` diagnoses that run from its own log and checkpoints and writes the HTML report.
3. The same training saved through :class:`trainprobe.save.CheckpointWriter`: no stall, no torn checkpoint;
   only the gradient explosion is left, and triage names the checkpoint to resume from.
4. When ``ssh localhost`` accepts this user's key, the same triage runs through ``--on``.

What is staged depends only on step numbers and fixed sizes, so the story (which saves tore, the spikes after
them, the blow-up, where to resume) is the same on every run at any load: :func:`planted_story` is what the
demo staged, :func:`told_story` what triage found, and the demo succeeds when the two are equal.

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
    # Every save of a run stalls the same on the run's (simulated) clock; the real seconds are only shown.
    stall = max(story.stalls, default=0.0)
    line = (
        f"trained {shape['steps']} steps in {story.seconds:.0f} s, saving every {shape['save_every']} steps "
        f"with {'the naive background-thread save' if mode == 'naive' else 'CheckpointWriter'}: "
        f"{len(story.checkpoints)} checkpoints kept, each save stalled the loop {stall:.3g} s "
        f"{'on the simulated slow storage' if mode == 'naive' else '(the copy)'}; "
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
    stalls = [c for c in report.conclusions if c.cause == "save-stall"]
    races = sum(c.cause == "save-race" for c in report.conclusions)
    explosions = sum(c.cause == "gradient-explosion" for c in report.conclusions)
    run.say(
        f"trainprobe triage {run.workdir / 'naive'}: {sum(len(c.anomalies) for c in stalls)} anomalies "
        f"right after {len(stalls)} save(s) that blocked the loop, {races} of {len(report.checkpoints)} "
        "checkpoints torn by saves that raced training (a separate finding: the live run never read them "
        f"back), {explosions} gradient explosion; HTML report: {html}"
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
    from trainprobe.tasks import triage_on

    target = run.remote_target
    try:
        report = triage_on(target, str(run.workdir / "naive"), stall_floor_s=STALL_FLOOR_S)
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


def planted_story(shape: dict[str, int]) -> dict[str, Any]:
    """What the demo stages for a :attr:`DemoRun.shape`, from the step numbers alone (the keys of
    :func:`told_story`): every naive save before the corrupt batch has a step after it, so it tears (a
    finding of its own), and its stall makes the loss spike on the first step after it (another, joined by
    time); the save after the blow-up holds NaN. With CheckpointWriter only the blow-up is left, and the last
    save before it is where to resume."""
    steps, every, blowup = shape["steps"], shape["save_every"], shape["blowup_at"]
    saves = list(range(every, steps + 1, every))
    raced = [s for s in saves if s < blowup and s < steps]
    return {
        "naive_saves": saves,
        "naive_torn": raced,
        "naive_raced_saves": raced,
        "naive_stalled_saves": raced,
        "naive_spikes_after_stalls": [s + 1 for s in raced],
        "naive_explosions": [blowup],
        "naive_other_causes": [],
        "writer_torn": [],
        "writer_causes": [("gradient-explosion", blowup)],
        "writer_resume_from": max(s for s in saves if s < blowup),
    }


def told_story(run: DemoRun) -> dict[str, Any]:
    """What triage found in the demo's runs, as counts and steps only (no times, no paths): equal on every
    run of the same shape, and equal to :func:`planted_story` when triage found what was staged."""
    naive, writer = run.results.get("naive"), run.results.get("writer")
    if naive is None or writer is None:
        return {}
    races = [c for c in naive.conclusions if c.cause == "save-race"]
    stalls = [c for c in naive.conclusions if c.cause == "save-stall"]
    step_at = {c.path: c.step for c in naive.checkpoints}

    def steps_of(values: list[float | int | None]) -> list[int]:
        return sorted(int(v) for v in values if v is not None)

    return {
        "naive_saves": steps_of([c.step for c in naive.checkpoints]),
        "naive_torn": steps_of([c.step for c in naive.checkpoints if c.verdict == "torn"]),
        "naive_raced_saves": steps_of([step_at.get(c.checkpoint or "") for c in races]),
        "naive_stalled_saves": steps_of([step_at.get(c.checkpoint or "") for c in stalls]),
        "naive_spikes_after_stalls": steps_of([a.step for c in stalls for a in c.anomalies]),
        "naive_explosions": steps_of([c.step for c in naive.conclusions if c.cause == "gradient-explosion"]),
        "naive_other_causes": [
            (c.cause, int(c.step))
            for c in naive.conclusions
            if c.cause not in ("save-race", "save-stall", "gradient-explosion")
        ],
        "writer_torn": steps_of([c.step for c in writer.checkpoints if c.verdict == "torn"]),
        "writer_causes": [(c.cause, int(c.step)) for c in writer.conclusions],
        "writer_resume_from": (
            int(writer.resume_from.step)
            if writer.resume_from is not None and writer.resume_from.step is not None
            else None
        ),
    }


def story_found(run: DemoRun) -> bool:
    """Whether triage found, on its own, exactly what the demo planted (:func:`planted_story`): which naive
    saves tore, which stalled with a loss spike after the stall, the blow-up and nothing else; with
    CheckpointWriter no torn checkpoint, only the blow-up, and the checkpoint to resume from."""
    return told_story(run) == planted_story(run.shape)
