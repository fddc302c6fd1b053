"""The seed's story as a real (small, CPU) training run, for ``trainprobe demo`` and the triage tests.

Everything staged here is a function of the step number and fixed sizes, never of how fast this machine is
right now: the same seed writes the same log lines (but for the time of day), the same checkpoints and the
same tears in every run, on a quiet laptop or a CPU shared with other work. The log's clock is the run's
*simulated* clock, counted in whole milliseconds: it starts at the real time the run starts and then moves
``step_ms`` per training step plus each save's stall (what the simulated machine spends), so the gaps triage
reads from the timestamps do not depend on this machine's load. Real time is only measured
(:attr:`StoryRun.seconds`), never acted on.

A residual MLP (:func:`trainprobe.demo.race.build_model`) learns to classify a data stream that drifts with
that clock (an online-learning feed: the decision boundary rotates ``drift_per_step`` radians per
``step_ms``). It logs one line per step in a text format ``trainprobe logs`` reads (UTC timestamps,
``step N | loss X | acc Y | lr Z``, accuracy on a fresh held-out batch) and one line per save. It saves every
``save_every`` steps in one of two ways:

- ``"naive"``: the seed's save on the seed's slow shared storage. The loop first blocks on the storage for
  as long as ``stall_steps`` training steps take (``stall_steps * step_ms`` on the clock); the stream drifts
  on meanwhile (``stall_steps * drift_per_step``), so the loss spikes when training resumes, and recovers.
  Then ``torch.save`` of the *live* model and optimizer state dicts runs in a background thread while
  training goes on (as in ``trainprobe.demo.race``'s ``mode="background"``). The tear is caused, not hoped
  for: the save thread stops half-way through the tensor bytes until the loop's next optimizer step has
  mutated the live tensors (:class:`trainprobe.demo.race.TearGate`), so every naive save that a step follows
  mixes two optimizer steps (the last save of the run, with no step after it, comes out whole).
- ``"writer"``: the same loop saving through :class:`trainprobe.save.CheckpointWriter`, which copies the
  state before it returns and does all file I/O in its own thread. Its stall on the clock is that copy at
  ``copy_bytes_per_s``.

``blowup_at`` feeds one adversarial batch at that step: a corrupt record of Inf features, so Inf - Inf = NaN
in the first layer, the loss and every gradient are NaN, and AdamW writes NaN into its moments and the
weights. The loss is NaN from then on and accuracy falls to what a NaN model scores (12 %): a cliff, with no
save near it.

torch is imported only when :func:`train_story` runs."""

from __future__ import annotations

import datetime as _dt
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from trainprobe.demo.race import TearGate

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
    #: seconds each save blocked the loop on the simulated clock (what the log's timestamps show)
    stalls: list[float] = field(default_factory=list)
    #: real seconds the whole run took on this machine (shown, never acted on)
    seconds: float = 0.0
    blowup_at: int | None = None


class StepClock:
    """The simulated clock the log is stamped with: the real time it was made at, then only what
    :meth:`advance` adds (whole milliseconds, so no rounding drifts between runs)."""

    def __init__(self, start: _dt.datetime | None = None) -> None:
        began = start or _dt.datetime.now(_dt.timezone.utc)
        self._start = began.replace(microsecond=began.microsecond // 1000 * 1000)
        self.ms = 0

    def advance(self, ms: int) -> None:
        self.ms += ms

    def stamp(self) -> str:
        now = self._start + _dt.timedelta(milliseconds=self.ms)
        return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}"


class _Stream:
    """The data stream, drifting with the simulated clock: its decision boundary rotates in the plane of two
    random orthonormal directions, ``drift_per_step`` radians per ``step_ms`` (a stall included)."""

    def __init__(
        self, torch: Any, seed: int, sizes: tuple[int, int, int], drift_per_step: float, step_ms: int
    ) -> None:
        self._torch = torch
        self._gen = torch.Generator().manual_seed(seed + 1)
        a = torch.randn(sizes[0], generator=self._gen)
        b = torch.randn(sizes[0], generator=self._gen)
        b -= (a @ b) / (a @ a) * a
        self._a, self._b = a / a.norm(), b / b.norm()
        self._width, self._batch, self._eval_batch = sizes
        self._drift_per_step, self._step_ms = drift_per_step, step_ms

    def boundary(self, ms: int) -> Any:
        angle = self._drift_per_step * ms / self._step_ms
        return math.cos(angle) * self._a + math.sin(angle) * self._b

    def batch(self, boundary: Any, *, corrupt: bool) -> tuple[Any, Any]:
        """A training batch (features, 0/1 labels); ``corrupt``: its first record is Inf features, so
        Inf - Inf = NaN in the first layer's sums, the loss and every gradient are NaN, and AdamW writes NaN
        into its moments and weights."""
        x = self._torch.randn(self._batch, self._width, generator=self._gen)
        y = (x @ boundary > -_OFFSET).float().unsqueeze(1)
        if corrupt:
            x[0] = float("inf")
        return x, y

    def accuracy(self, model: Any, boundary: Any) -> float:
        """The model's accuracy on a fresh held-out batch of the current stream."""
        with self._torch.no_grad():
            x = self._torch.randn(self._eval_batch, self._width, generator=self._gen)
            y = x @ boundary > -_OFFSET
            return float(((model(x)[:, 0] > 0) == y).float().mean().item())


def _copy_ms(model: Any, copy_bytes_per_s: float) -> int:
    """The writer's copy on the simulated clock: weights and AdamW's two moments (the bytes it copies, give
    or take the step counters) at ``copy_bytes_per_s``."""
    state_bytes = 3 * sum(p.numel() * p.element_size() for p in model.parameters())
    return max(1, round(1000 * float(state_bytes) / copy_bytes_per_s))


def _step(torch: Any, model: Any, optimizer: Any, x: Any, y: Any, gates: list[TearGate]) -> float:
    """One AdamW step on the batch (``x``, ``y``); its loss."""
    from trainprobe.demo.race import held_saves

    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    # The tear is the same bytes on every run: a naive save waits half-way for this step.
    with held_saves(gates):
        optimizer.step()
    return float(loss.item())


def _save_naive(torch: Any, step: int, model: Any, optimizer: Any, path: Path) -> TearGate:
    """The seed's save: ``torch.save`` of the live state dicts in a background thread (its TearGate)."""
    from trainprobe.demo.race import naive_save, tensor_bytes

    state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    return naive_save(torch, state, path, tensor_bytes(state, torch) // 2)


def train_story(
    run_dir: str | Path,
    *,
    mode: StoryMode = "naive",
    steps: int = 250,
    save_every: int = 50,
    stall_steps: int = 100,
    step_ms: int = 20,
    blowup_at: int | None = 230,
    layers: int = 24,
    width: int = 64,
    batch: int = 128,
    eval_batch: int = 512,
    lr: float = 3e-3,
    drift_per_step: float = 0.03,
    copy_bytes_per_s: float = 1e9,
    seed: int = 0,
) -> StoryRun:
    """Train and save as the module docstring says: ``run_dir/train.log`` and ``run_dir/ckpt/``."""
    from trainprobe.demo.race import build_model, finish_saves
    from trainprobe.save.files import checkpoint_name
    from trainprobe.save.writer import CheckpointWriter, import_torch

    if steps < 1 or save_every < 1 or step_ms < 1 or stall_steps < 0:
        raise ValueError("steps, save_every and step_ms must be at least 1, stall_steps at least 0")
    torch = import_torch("the demo's training")
    run_dir = Path(run_dir)
    ckpt_dir = run_dir / "ckpt"
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    run = StoryRun(mode, run_dir, run_dir / "train.log", steps, blowup_at=blowup_at)
    model = build_model(layers, width, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    stream = _Stream(torch, seed, (width, batch, eval_batch), drift_per_step, step_ms)
    writer = CheckpointWriter(ckpt_dir) if mode == "writer" else None
    copy_ms = _copy_ms(model, copy_bytes_per_s)
    gates: list[TearGate] = []
    clock = StepClock()
    threads_before = torch.get_num_threads()
    # One intra-op thread: on a small model more threads only contend (10x slower on a busy 2-core machine),
    # and one thread keeps every float bit-identical from run to run.
    torch.set_num_threads(1)
    started = time.perf_counter()
    try:
        with open(run.log_path, "w", encoding="utf-8", buffering=1) as log:
            log.write(
                f"{clock.stamp()} starting run: {mode} saves every {save_every} steps, AdamW lr {lr:g}\n"
            )
            for step in range(1, steps + 1):
                boundary = stream.boundary(clock.ms)
                x, y = stream.batch(boundary, corrupt=step == blowup_at)
                loss_value = _step(torch, model, optimizer, x, y, gates)
                acc = stream.accuracy(model, boundary)
                clock.advance(step_ms)
                log.write(
                    f"{clock.stamp()} step {step} | loss {loss_value:.4f} | acc {acc:.4f} | lr {lr:g}\n"
                )
                if step % save_every:
                    continue
                path = ckpt_dir / checkpoint_name(step)
                log.write(f"{clock.stamp()} Saving checkpoint to {path.relative_to(run_dir)} (step {step})\n")
                if writer is not None:
                    writer.save(step, model=model, optimizer=optimizer)
                    stall_ms = copy_ms
                else:
                    # The slow storage blocks the loop on the simulated clock only: sleeping for real would
                    # change nothing the run writes, only how long the demo takes.
                    stall_ms = stall_steps * step_ms
                    gates.append(_save_naive(torch, step, model, optimizer, path))
                clock.advance(stall_ms)
                run.stalls.append(stall_ms / 1000)
                run.checkpoints.append(path)
    finally:
        finish_saves(gates)
        if writer is not None:
            writer.close()
        torch.set_num_threads(threads_before)
    run.seconds = time.perf_counter() - started
    run.checkpoints = [p for p in run.checkpoints if p.exists()]  # CheckpointWriter keeps the newest few
    return run
