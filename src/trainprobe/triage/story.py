"""The seed's story as a real (small, CPU) training run, for ``trainprobe demo`` and the triage tests.

A residual MLP (:func:`trainprobe.save.race.build_model`) learns to classify a data stream that drifts slowly in
real time (an online-learning feed: the true decision boundary rotates with the wall clock). It logs one line per
step in the text format ``trainprobe logs`` reads (UTC timestamps, ``step N | loss X | acc Y | lr Z``) and a line
per save, and saves every ``save_every`` steps in one of two ways:

- ``"naive"``: the seed's save. The loop first blocks on the storage for ``stall_s`` seconds (a stand-in for the
  seed's slow shared filesystem; the time is spent in ``time.sleep``, and the log shows it as a stall), then
  ``torch.save`` of the live model and optimizer state dicts runs in a background thread while training goes on
  (exactly ``trainprobe.save.race``'s ``mode="background"``), so files mix optimizer steps. While the loop is
  stalled the stream drifts on: the loss spikes when training resumes, and recovers.
- ``"writer"``: the same loop saving through :class:`trainprobe.save.CheckpointWriter` (a snapshot copy, then the
  write in the background): no stall, no torn file.

``blowup_at`` feeds one adversarial batch at that step: a corrupt record whose features are ~1e38, so the forward
pass overflows, the gradients are non-finite and AdamW turns its moments and the weights into NaN/Inf. The loss is
NaN from then on and accuracy falls to chance: a cliff, with no save near it.

torch is imported only when :func:`train_story` runs."""

from __future__ import annotations

import datetime as _dt
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

StoryMode = Literal["naive", "writer"]


@dataclass
class StoryRun:
    mode: str
    run_dir: Path
    log_path: Path
    steps: int
    checkpoints: list[Path] = field(default_factory=list)
    stalls: list[float] = field(default_factory=list)
    seconds: float = 0.0
    blowup_at: int | None = None


def _stamp() -> str:
    now = _dt.datetime.now(_dt.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}"


def train_story(
    run_dir: str | Path,
    *,
    mode: StoryMode = "naive",
    steps: int = 240,
    save_every: int = 40,
    stall_s: float = 2.0,
    blowup_at: int | None = 220,
    layers: int = 32,
    width: int = 64,
    batch: int = 64,
    lr: float = 3e-3,
    drift_rad_per_s: float = 0.6,
    seed: int = 0,
) -> StoryRun:
    """Train and save as described in the module docstring; write ``run_dir/train.log`` and ``run_dir/ckpt/``."""
    from trainprobe.save.race import build_model
    from trainprobe.save.writer import CheckpointWriter, _torch, checkpoint_name

    torch = _torch()
    run_dir = Path(run_dir)
    ckpt_dir = run_dir / "ckpt"
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    run = StoryRun(mode, run_dir, run_dir / "train.log", steps, blowup_at=blowup_at)
    model = build_model(layers, width, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed + 1)
    a = torch.randn(width, generator=gen)
    b = torch.randn(width, generator=gen)
    b -= (a @ b) / (a @ a) * a
    a, b = a / a.norm(), b / b.norm()
    writer = CheckpointWriter(ckpt_dir) if mode == "writer" else None
    threads: list[threading.Thread] = []
    started = time.perf_counter()
    with open(run.log_path, "w", encoding="utf-8", buffering=1) as log:
        log.write(f"{_stamp()} starting run: {mode} saves every {save_every} steps, AdamW lr {lr:g}\n")
        for step in range(1, steps + 1):
            angle = drift_rad_per_s * (time.perf_counter() - started)
            boundary = math.cos(angle) * a + math.sin(angle) * b
            x = torch.randn(batch, width, generator=gen)
            y = (x @ boundary > 0).float().unsqueeze(1)
            if step == blowup_at:
                # A corrupt record: features near float32's limit, with mixed signs, so sums overflow to Inf
                # and Inf - Inf = NaN in the forward pass.
                x[0] = torch.sign(torch.randn(width, generator=gen)) * 3e38
            logits = model(x)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            acc = float(((logits > 0).float() == y).float().mean())
            log.write(f"{_stamp()} step {step} | loss {float(loss):.4f} | acc {acc:.4f} | lr {lr:g}\n")
            if step % save_every:
                continue
            path = ckpt_dir / checkpoint_name(step)
            log.write(f"{_stamp()} Saving checkpoint to {path.relative_to(run_dir)} (step {step})\n")
            began = time.perf_counter()
            if writer is not None:
                writer.save(step, model=model, optimizer=optimizer)
            else:
                time.sleep(stall_s)
                state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
                thread = threading.Thread(target=torch.save, args=(state, path), daemon=True)
                thread.start()
                threads.append(thread)
            run.stalls.append(time.perf_counter() - began)
            run.checkpoints.append(path)
    for thread in threads:
        thread.join()
    if writer is not None:
        writer.close()
    run.seconds = time.perf_counter() - started
    return run


