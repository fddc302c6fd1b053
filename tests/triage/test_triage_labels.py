"""Triage of runs whose checkpoints say little about their step: names that count epochs, an optimizer without
step counters. Real torch-written files; a healthy run must come out healthy, resumed from its newest unit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from trainprobe.triage import triage  # noqa: E402


def _write_run(root: Path, optimizer: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt: Any = (
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        if optimizer == "sgd"
        else torch.optim.AdamW(model.parameters(), lr=1e-2)
    )
    lines = []
    step = 0
    for epoch in range(3):
        for _ in range(4):  # 4 optimizer steps per epoch
            step += 1
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            lines.append(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        # timm's CheckpointSaver names by epoch: checkpoint-0 after 4 optimizer steps
        state = {"epoch": epoch, "state_dict": model.state_dict(), "optimizer": opt.state_dict()}
        torch.save(state, root / f"checkpoint-{epoch}.pth.tar")
    (root / "train.log").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_a_healthy_run_named_by_epoch_resumes_from_its_newest_checkpoint(
    tmp_path: Path, optimizer: str
) -> None:
    _write_run(tmp_path, optimizer)
    report = triage(str(tmp_path))
    verdicts = {c.relpath: c.verdict for c in report.checkpoints}
    assert "torn" not in verdicts.values(), verdicts
    assert report.exit_code == 0, (
        verdicts,
        report.answers["broken"]["lines"],
        report.answers["logs"]["lines"],
    )
    assert report.resume_from is not None
    assert report.resume_from.relpath == "checkpoint-2.pth.tar"
    assert report.facts == []  # no save line, no constant rate: nothing for the log's facts to say
