"""`trainprobe demo`: the seed's story trained for real, and triage finding it on its own."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")


@pytest.mark.slow
def test_demo_tells_the_story(tmp_path: Path, cli: Any) -> None:
    result = cli("demo", "--dir", str(tmp_path), "--quick", "--no-remote")
    assert result.exit_code == 0, result.output
    out = re.sub(r"\s+", " ", result.stdout)
    # The exact story, the same on every run at any load: it is staged at fixed steps (trainprobe.demo.story).
    assert (
        "with the naive background-thread save: 4 checkpoints kept, each save stalled the loop 2 s on the "
        "simulated slow storage; a corrupt batch at step 180"
    ) in out
    assert (
        "3 anomalies right after 3 save(s) that blocked the loop, 3 of 4 checkpoints torn by saves that raced"
    ) in out
    assert "with CheckpointWriter: 3 checkpoints kept, each save stalled the loop 0.001 s (the copy)" in out
    assert "0 torn checkpoints, 0 save problems; what is left: a gradient explosion at step 180" in out
    assert "resume from ckpt/step-00000150.pt (step 150)" in out
    assert "the --on step is skipped" in out
    assert "trainprobe triage --on ssh=you@host" in out
    for save in (50, 100, 150):
        assert f"step {save}: the checkpoint save at step {save} raced training: ckpt/step-{save:08d}" in out
        assert f"step {save + 1}: the checkpoint save at step {save} blocked the loop 2 s and" in out
    assert out.count("that save stalled logging 2.0 s") == 3
    assert "step 180: a gradient explosion at step 180 blew up the optimizer state (high confidence)" in out
    assert "no checkpoint to resume from: no checkpoint is healthy before step 180" in out
    assert f"HTML report: {tmp_path / 'naive-triage.html'}" in out
    assert (tmp_path / "naive-triage.html").stat().st_size > 10_000
    assert sorted(p.name for p in (tmp_path / "naive" / "ckpt").iterdir()) == [
        f"step-{s:08d}.pt" for s in (50, 100, 150, 200)
    ]
    assert (tmp_path / "naive" / "train.log").read_text().count("Saving checkpoint") == 4
    again = cli("demo", "--dir", str(tmp_path), "--quick", "--no-remote")
    assert again.exit_code == 2
    assert "already exists" in re.sub(r"\s+", " ", again.stderr)


@pytest.mark.slow
@pytest.mark.ssh
def test_demo_remote_step_runs_triage_through_ssh(sshd: object, numpy_venv: Path) -> None:
    """The demo's --on step, pointed at the test sshd (the demo itself uses ssh=localhost)."""
    from fixtures.sshd import SshServer
    from trainprobe.demo import DemoRun, triage_remote
    from trainprobe.triage import triage
    from triage.runs import story_run

    assert isinstance(sshd, SshServer)
    story = story_run("naive", True)
    run = DemoRun(story.parent, remote=True, remote_target=f"{sshd.target('bash')}//python={numpy_venv}")
    if not (story.parent / "naive").exists():  # the demo's layout, in a directory the ssh user can read
        (story.parent / "naive").symlink_to(story)
    run.results["naive"] = triage(str(story), stall_floor_s=0.5)
    triage_remote(run)
    assert "same conclusions as the local triage" in run.steps[-1], run.steps
    assert run.results["remote"].target == run.remote_target
