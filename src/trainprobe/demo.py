"""``trainprobe demo``: a tiny training run whose optimizer state blows up, then trainprobe finding it.

Each step is a plain function over a :class:`DemoRun`; later features add steps to ``STEPS``. torch is
imported only inside the training step, so the rest of trainprobe works without it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainprobe.errors import UsageError


@dataclass
class DemoRun:
    """What the demo did so far: its directory, a narrative of steps and the results of each."""

    workdir: Path
    steps: list[str] = field(default_factory=list)
    checkpoints: list[Path] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)

    def say(self, line: str) -> None:
        self.steps.append(line)


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise UsageError(
            "the demo trains a small model with torch, which is not installed",
            hint="pip install 'trainprobe[torch]'",
        ) from None
    return torch


def train_and_save(run: DemoRun, *, steps: int = 30, save_every: int = 10) -> None:
    """Train a small MLP with AdamW on CPU; save model + optimizer state every ``save_every`` steps."""
    torch = _import_torch()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(256, 16)
    y = x.sum(dim=1, keepdim=True)
    for step in range(1, steps + 1):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if step == steps:
            # An exploding step: one gradient overflows to +Inf. AdamW's moments become Inf and the update
            # Inf/sqrt(Inf) turns the weights into NaN, exactly what a loss spike in fp32 does.
            model[2].weight.grad[0, :4] = float("inf")
        opt.step()
        if step % save_every == 0:
            path = run.workdir / f"step_{step:04d}.pt"
            torch.save(
                {
                    "model_state_dict": model.state_dict(),
                    "optimizer_state_dict": opt.state_dict(),
                    "step": step,
                },
                path,
            )
            run.checkpoints.append(path)
    run.say(
        f"trained a 2-layer MLP for {steps} steps with AdamW; saved {len(run.checkpoints)} checkpoints "
        f"(model + optimizer state) in {run.workdir}"
    )
    run.say(f"step {steps} exploded: one gradient overflowed to +Inf before the last save")


def scan_checkpoints(run: DemoRun) -> None:
    """Scan the checkpoint directory the way a user would: ``trainprobe scan DIR``."""
    from trainprobe.checkpoint import scan

    report = scan([str(run.workdir)])
    run.results["scan"] = report
    bad = [t.display_name for f in report.files for t in f.bad_tensors]
    run.say(
        f"trainprobe scan {run.workdir}: {len(bad)} tensor(s) with NaN/Inf, "
        "found without torch and without unpickling"
    )


STEPS: list[Callable[[DemoRun], None]] = [train_and_save, scan_checkpoints]


def run_demo(workdir: str | None = None) -> DemoRun:
    """Run every demo step in ``workdir`` (a fresh temporary directory by default, kept for inspection)."""
    path = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="trainprobe-demo-"))
    path.mkdir(parents=True, exist_ok=True)
    run = DemoRun(path)
    for step in STEPS:
        step(run)
    return run
