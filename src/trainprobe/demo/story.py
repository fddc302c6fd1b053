"""The seed's story as a real (small, CPU) training run, for ``trainprobe demo`` and the triage tests.

A residual MLP (:func:`trainprobe.demo.race.build_model`) learns to classify a data stream that drifts in
real time (an online-learning feed: the decision boundary rotates with the wall clock, ``drift_per_step``
radians per typical step time). It logs one line per step in a text format ``trainprobe logs`` reads (UTC
timestamps, ``step N | loss X | acc Y | lr Z``, accuracy on a fresh held-out batch) and one line per save.
It saves every ``save_every`` steps in one of two ways:

- ``"naive"``: the seed's save on the seed's slow shared storage. The loop first blocks on the storage (for
  as long as ``stall_steps`` training steps take, at least ``min_stall_s``), then ``torch.save`` of the
  *live* model and optimizer state dicts runs in a background thread while training goes on (as in
  ``trainprobe.demo.race``'s ``mode="background"``), slowly enough to span ``write_steps`` steps, so the
  file mixes optimizer steps. While the loop is stalled the stream drifts on: the loss spikes when
  training resumes, and recovers. The slow storage is simulated (``time.sleep`` in the training thread before
  the save, and per write in the save thread).
- ``"writer"``: the same loop saving through :class:`trainprobe.save.CheckpointWriter`, which copies the
  state before it returns and does all file I/O in its own thread (on the real disk: slow storage, being off
  the training thread and after the copy, could change neither the stall nor the snapshot).

``blowup_at`` feeds one adversarial batch at that step: a corrupt record of Inf features, so Inf - Inf = NaN
in the first layer, the loss and every gradient are NaN, and AdamW writes NaN into its moments and the
weights. The loss is NaN from then on and accuracy falls to what a NaN model scores (12 %): a cliff, with no
save near it.

torch is imported only when :func:`train_story` runs."""

from __future__ import annotations

import collections
import datetime as _dt
import io
import math
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

StoryMode = Literal["naive", "writer"]
# The boundary sits 1.2 sigma off the origin: 88 % of samples are positive, so a model that outputs NaN (which
# never compares > 0) scores 12 %, far below a working model.
_OFFSET = 1.2


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


class _SlowStorage(io.RawIOBase):
    """A file that takes ``len(data) / rate`` seconds per write: the stand-in for the seed's slow shared
    filesystem (the time is spent in ``time.sleep``)."""

    def __init__(self, fh: BinaryIO, bytes_per_s: float) -> None:
        super().__init__()
        self._fh = fh
        self._rate = bytes_per_s

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        time.sleep(len(data) / self._rate)
        return self._fh.write(data)


def _save_slowly(torch: Any, state: Any, path: Path, bytes_per_s: float) -> None:
    with open(path, "wb") as fh, _SlowStorage(fh, bytes_per_s) as slow:
        torch.save(state, slow)


def train_story(
    run_dir: str | Path,
    *,
    mode: StoryMode = "naive",
    steps: int = 250,
    save_every: int = 50,
    stall_steps: int = 100,
    min_stall_s: float = 1.0,
    blowup_at: int | None = 230,
    layers: int = 24,
    width: int = 64,
    batch: int = 128,
    eval_batch: int = 512,
    lr: float = 3e-3,
    drift_per_step: float = 0.03,
    write_steps: int = 8,
    seed: int = 0,
) -> StoryRun:
    """Train and save as the module docstring says: ``run_dir/train.log`` and ``run_dir/ckpt/``."""
    from trainprobe.demo.race import build_model
    from trainprobe.save.writer import CheckpointWriter, checkpoint_name, import_torch

    torch = import_torch("the demo's training")
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
    threads_before = torch.get_num_threads()
    # One intra-op thread: on a small model more threads only contend (10x slower on a busy 2-core machine).
    torch.set_num_threads(1)
    durations: collections.deque[float] = collections.deque(maxlen=20)
    started = time.perf_counter()
    try:
        with open(run.log_path, "w", encoding="utf-8", buffering=1) as log:
            log.write(f"{_stamp()} starting run: {mode} saves every {save_every} steps, AdamW lr {lr:g}\n")
            angle, last = 0.0, time.perf_counter()
            for step in range(1, steps + 1):
                now = time.perf_counter()
                typical = statistics.median(durations) if durations else now - last
                # The stream moves with the wall clock, measured in the loop's own typical step time so the
                # story is the same on a fast laptop and a loaded CI machine.
                angle += drift_per_step * (now - last) / max(typical, 1e-6)
                last = now
                boundary = math.cos(angle) * a + math.sin(angle) * b
                x = torch.randn(batch, width, generator=gen)
                y = (x @ boundary > -_OFFSET).float().unsqueeze(1)
                if step == blowup_at:
                    # A corrupt record (an Inf feature vector): Inf - Inf = NaN in the first layer's sums, so
                    # the loss and every gradient are NaN, and AdamW writes NaN into its moments and weights.
                    x[0] = float("inf")
                logits = model(x)
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                loss_value = loss.item()
                with torch.no_grad():  # accuracy on a fresh held-out batch of the current stream
                    x_eval = torch.randn(eval_batch, width, generator=gen)
                    y_eval = x_eval @ boundary > -_OFFSET
                    acc = ((model(x_eval)[:, 0] > 0) == y_eval).float().mean().item()
                durations.append(time.perf_counter() - now)
                log.write(f"{_stamp()} step {step} | loss {loss_value:.4f} | acc {acc:.4f} | lr {lr:g}\n")
                if step % save_every:
                    continue
                path = ckpt_dir / checkpoint_name(step)
                log.write(f"{_stamp()} Saving checkpoint to {path.relative_to(run_dir)} (step {step})\n")
                began = time.perf_counter()
                if writer is not None:
                    writer.save(step, model=model, optimizer=optimizer)
                else:
                    typical = statistics.median(durations)
                    stall = max(min_stall_s, stall_steps * typical)
                    # Weights and AdamW's two moments: the bytes the save writes, give or take the pickle.
                    state_bytes = 3 * sum(p.numel() * p.element_size() for p in model.parameters())
                    rate = state_bytes / (write_steps * typical)
                    time.sleep(stall)
                    state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
                    thread = threading.Thread(
                        target=_save_slowly, args=(torch, state, path, rate), daemon=True
                    )
                    thread.start()
                    threads.append(thread)
                run.stalls.append(time.perf_counter() - began)
                run.checkpoints.append(path)
    finally:
        for thread in threads:
            thread.join()
        if writer is not None:
            writer.close()
        torch.set_num_threads(threads_before)
    run.seconds = time.perf_counter() - started
    run.checkpoints = [p for p in run.checkpoints if p.exists()]  # CheckpointWriter keeps the newest few
    return run
