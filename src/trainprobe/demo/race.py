"""A small CPU training loop that reproduces the torn-checkpoint race, and the same loop saved safely.

``train(run_dir, mode="background")`` saves the naive way: ``torch.save`` of the model and optimizer state
dicts from a background thread while the loop keeps stepping, so the file mixes optimizer steps (``trainprobe
check`` calls it torn). Left to timing, such a save tears only when a step lands inside its write (a fast
disk or a quiet machine may write the whole file between two steps); here the tear window is made certain:
the save thread stops half-way through the tensor bytes (:class:`TearGate`) until the loop has taken its
next optimizer step, which mutates the live tensors the rest of the file is written from. Every naive save
that the loop steps after is torn; the last one, with no step after it, is not.
``mode="writer"`` saves the same loop through :class:`~trainprobe.save.writer.CheckpointWriter`
(``"writer-overlap"``: with ``overlap_copy=True``);
``mode="in-loop"`` blocks on ``torch.save`` (``"in-loop-fsync"`` also fsyncs, as durable as the writer);
``mode="none"`` does not save. Each save's stall (time the loop
was blocked) is measured.

With ``log_path`` the loop writes a plain training log, one line per event::

    2026-11-29 22:31:02,123 INFO step=10 loss=0.482113 lr=0.001 grad_norm=1.2031
    2026-11-29 22:31:02,130 INFO Saving checkpoint to run/ckpt/step-00000010.pt (step=10)

Saved objects are ``{"step": n, "model": ..., "optimizer": ...}`` where ``n`` counts optimizer steps taken, so
it equals AdamW's per-parameter ``step`` counters in a consistent checkpoint."""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal, TextIO

from trainprobe.errors import UsageError
from trainprobe.save.files import checkpoint_name
from trainprobe.save.writer import CheckpointWriter, import_torch

SaveMode = Literal["none", "in-loop", "in-loop-fsync", "background", "writer", "writer-overlap"]
SAVE_MODES: tuple[str, ...] = ("none", "in-loop", "in-loop-fsync", "background", "writer", "writer-overlap")


@dataclass
class TrainingRun:
    """What one ``train`` call did."""

    mode: str
    steps: int
    checkpoints: list[Path] = field(default_factory=list)
    #: seconds the training loop was blocked by each save
    stalls: list[float] = field(default_factory=list)
    #: seconds per training step (forward, backward, optimizer step), without saves
    step_seconds: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    log_path: Path | None = None
    #: wall time of the whole loop, saves included (not the final wait for background writes)
    loop_seconds: float = 0.0

    @property
    def median_stall(self) -> float:
        return _median(self.stalls)

    @property
    def median_step(self) -> float:
        return _median(self.step_seconds)


#: the longest a gated save or the loop waits for the other (a save thread that died must not hang training)
GATE_TIMEOUT_S = 60.0


class TearGate:
    """The file a naive background save writes to, with the tear window made certain.

    The save thread, once it has written ``half`` bytes, sets :attr:`mid_write` and waits for
    :attr:`stepped`; the loop waits for :attr:`mid_write` before its next optimizer step and sets
    :attr:`stepped` after it, and waits for the save to end before the step after. So exactly one step
    mutates the live parameters and optimizer state while the file is provably half-written: the tensors
    written before hold step ``n``, those after step ``n + 1``, in every run on every machine (torch writes
    the tensors in a fixed order, so both halves hold some AdamW step counters). Synchronised by events, not
    by luck."""

    def __init__(self, raw: BinaryIO, half: int) -> None:
        self.raw = raw
        self.half = half
        self.written = 0
        self.mid_write = threading.Event()
        self.stepped = threading.Event()
        self.thread: threading.Thread | None = None

    def write(self, data: bytes) -> int:
        count = self.raw.write(data)
        self.written += len(data)
        if self.written >= self.half and not self.mid_write.is_set():
            self.mid_write.set()
            self.stepped.wait(GATE_TIMEOUT_S)
        return count

    def flush(self) -> None:
        self.raw.flush()


def tensor_bytes(state: Any, torch: Any) -> int:
    """The bytes of the distinct tensor storages in a (nested) state dict: what torch.save writes as data."""
    seen: dict[int, int] = {}
    stack = [state]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return sum(seen.values())


def naive_save(torch: Any, state: dict[str, Any], path: Path, gate_half: int) -> TearGate:
    """Start ``torch.save(state, path)`` on a background thread, writing through a :class:`TearGate`; the
    caller waits for its :attr:`~TearGate.mid_write` before the next optimizer step and sets its
    :attr:`~TearGate.stepped` after it (or at once, for a save that must come out whole)."""
    raw = open(path, "wb")  # noqa: SIM115 - closed by the save thread
    gate = TearGate(raw, gate_half)

    def save() -> None:
        try:
            torch.save(state, gate)
        finally:
            gate.mid_write.set()  # a save that failed (or never got half-way) holds the loop up no longer
            raw.close()

    gate.thread = threading.Thread(target=save, name="naive-save", daemon=True)
    gate.thread.start()
    return gate


@contextlib.contextmanager
def held_saves(gates: list[TearGate]) -> Iterator[None]:
    """Around one optimizer step: a naive save still being written is half-way through the live tensors
    before the step changes them, and resumes only after it, so its tear is certain."""
    pending = [g for g in gates if not g.stepped.is_set()]
    for gate in pending:
        gate.mid_write.wait(GATE_TIMEOUT_S)
    yield
    for gate in pending:
        gate.stepped.set()
    # The rest of the file is written before the next step: without this join the steps after this one raced
    # the second half on a busy machine (the first save's bytes differed between two runs of the story).
    for gate in pending:
        if gate.thread is not None:
            gate.thread.join(GATE_TIMEOUT_S)


def finish_saves(gates: list[TearGate]) -> None:
    """Let every naive save finish (the last one has no step after it: it is written whole) and join it."""
    for gate in gates:
        gate.stepped.set()
    for gate in gates:
        if gate.thread is not None:
            gate.thread.join()


def _median(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _timestamp() -> str:
    now = _dt.datetime.now()
    return now.strftime("%Y-%m-%d %H:%M:%S") + f",{now.microsecond // 1000:03d}"


def build_model(layers: int, width: int, seed: int) -> Any:
    """A residual MLP with ``layers`` Linear blocks: many parameter tensors, so one save spans several steps,
    and residual connections so it actually learns. Parameters: ``blocks.N.weight/bias``, ``head.*``."""
    torch = import_torch("the demo's training")
    torch.manual_seed(seed)

    class ResidualMLP(torch.nn.Module):  # type: ignore[misc,name-defined,unused-ignore]
        def __init__(self) -> None:
            super().__init__()
            self.blocks = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))
            self.head = torch.nn.Linear(width, 1)

        def forward(self, x: Any) -> Any:
            for block in self.blocks:
                x = x + torch.tanh(block(x)) / math.sqrt(layers)
            return self.head(x)

    return ResidualMLP()


def train(
    run_dir: str | os.PathLike[str],
    *,
    steps: int = 200,
    save_every: int = 10,
    mode: SaveMode = "background",
    layers: int = 32,
    width: int = 256,
    batch: int = 2,
    lr: float = 1e-3,
    betas: tuple[float, float] = (0.9, 0.999),
    weight_decay: float = 0.01,
    clip_grad: float | None = 1.0,
    seed: int = 0,
    keep: int | None = None,
    log_path: str | os.PathLike[str] | None = None,
    log_every: int = 1,
    lr_at: Callable[[int], float] | None = None,
    num_threads: int = 1,
    torn: Callable[[int], bool] | None = None,
) -> TrainingRun:
    """Train an MLP on a fixed regression task for ``steps`` AdamW steps, saving every ``save_every`` steps.

    Checkpoints go to ``run_dir/ckpt``. ``lr_at(step)`` may override the learning rate per step (e.g. to
    inject a spike for a demo). ``torn(step)``: whether the naive background save of that step is torn (a
    step lands in its write; default: every one); the others finish before the next step, as a fast disk's
    would. Returns what happened, including each save's stall.
    """
    if mode not in SAVE_MODES:
        raise UsageError(f"unknown save mode {mode!r}", hint=f"use one of: {', '.join(SAVE_MODES)}")
    if steps < 1 or save_every < 1:
        raise UsageError("steps and save_every must be at least 1")
    torch = import_torch("the demo's training")
    threads_before = torch.get_num_threads()
    # One intra-op thread: the race (and the stall measurement) should not depend on how busy the other cores
    # are; OpenMP workers spinning on a loaded machine stretch steps far more than saves.
    torch.set_num_threads(num_threads)
    try:
        return _train(
            torch,
            Path(run_dir),
            steps=steps,
            save_every=save_every,
            mode=mode,
            layers=layers,
            width=width,
            batch=batch,
            lr=lr,
            betas=betas,
            weight_decay=weight_decay,
            clip_grad=clip_grad,
            seed=seed,
            keep=keep,
            log_path=log_path,
            log_every=log_every,
            lr_at=lr_at,
            torn=torn,
        )
    finally:
        torch.set_num_threads(threads_before)


def _train(
    torch: Any,
    run_dir: Path,
    *,
    steps: int,
    save_every: int,
    mode: str,
    layers: int,
    width: int,
    batch: int,
    lr: float,
    betas: tuple[float, float],
    weight_decay: float,
    clip_grad: float | None,
    seed: int,
    keep: int | None,
    log_path: str | os.PathLike[str] | None,
    log_every: int,
    lr_at: Callable[[int], float] | None,
    torn: Callable[[int], bool] | None,
) -> TrainingRun:
    ckpt_dir = Path(run_dir) / "ckpt"
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    model = build_model(layers, width, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed + 1)
    teacher = torch.randn(width, 1, generator=generator) / math.sqrt(width)
    run = TrainingRun(mode=mode, steps=steps)
    writer = _writer_for(mode, ckpt_dir, keep)
    gates: list[TearGate] = []
    run.log_path = None if log_path is None else Path(log_path)
    log = _open_log(run.log_path)
    loop_began = time.perf_counter()
    try:
        for step in range(1, steps + 1):
            current_lr = lr_at(step) if lr_at is not None else lr
            with held_saves(gates):
                began = time.perf_counter()
                x = torch.randn(batch, width, generator=generator)
                loss, grad_norm = _step(
                    torch, model, optimizer, x, torch.tanh(x @ teacher), current_lr, clip_grad
                )
            run.step_seconds.append(time.perf_counter() - began)
            run.losses.append(loss)
            if log is not None and step % log_every == 0:
                log.write(
                    f"{_timestamp()} INFO step={step} loss={loss:.6f} lr={current_lr:g} "
                    f"grad_norm={grad_norm:.4f}\n"
                )
            if step % save_every:
                continue
            path = ckpt_dir / checkpoint_name(step)
            if log is not None:
                log.write(f"{_timestamp()} INFO Saving checkpoint to {path} (step={step})\n")
            began = time.perf_counter()
            if mode in ("in-loop", "in-loop-fsync"):
                _save_in_loop(torch, _live_state(step, model, optimizer), path, fsync=mode == "in-loop-fsync")
            elif mode == "background":
                whole = torn is not None and not torn(step)
                gates.append(_save_in_background(torch, _live_state(step, model, optimizer), path, whole))
            elif writer is not None:
                writer.save(step, model=model, optimizer=optimizer)
            if mode != "none":
                run.stalls.append(time.perf_counter() - began)
                run.checkpoints.append(path)
    finally:
        run.loop_seconds = time.perf_counter() - loop_began
        finish_saves(gates)
        if writer is not None:
            writer.close()
            # The writer's own account: save() plus, with overlap_copy, the time a held optimizer.step()
            # waited for the copy, which the timer around save() above cannot see.
            run.stalls = list(writer.stall_seconds)
        if log is not None:
            log.close()
    if keep is not None:
        run.checkpoints = [p for p in run.checkpoints if p.exists()]
    return run


def _step(
    torch: Any, model: Any, optimizer: Any, x: Any, y: Any, lr: float, clip_grad: float | None
) -> tuple[float, float]:
    """One AdamW step at learning rate ``lr`` on the batch (``x``, ``y``): (loss, gradient norm before
    clipping, NaN without clipping)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = (
        float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad))
        if clip_grad is not None
        else float("nan")
    )
    optimizer.step()
    return loss.item(), grad_norm


def _writer_for(mode: str, directory: Path, keep: int | None) -> CheckpointWriter | None:
    """The CheckpointWriter the writer modes save through (None for the others)."""
    if mode not in ("writer", "writer-overlap"):
        return None
    return CheckpointWriter(directory, keep=keep, overlap_copy=mode == "writer-overlap")


def _open_log(path: Path | None) -> TextIO | None:
    """The training log, appended to line by line (None: no log); the caller closes it."""
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "a", encoding="utf-8", buffering=1)


def _live_state(step: int, model: Any, optimizer: Any) -> dict[str, Any]:
    """What a naive save writes: the state dicts, which hold the live tensors."""
    return {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}


def _save_in_loop(torch: Any, state: dict[str, Any], path: Path, *, fsync: bool) -> None:
    with open(path, "wb") as f:
        torch.save(state, f)
        if fsync:  # durable, as CheckpointWriter's files are
            f.flush()
            os.fsync(f.fileno())


def _save_in_background(torch: Any, state: dict[str, Any], path: Path, whole: bool) -> TearGate:
    """The bug this module exists to show: ``state`` holds the live tensors, and the next step tears the
    file; ``whole``: it is written before the next step, as a fast disk would."""
    gate = naive_save(torch, state, path, tensor_bytes(state, torch) // 2)
    if whole:
        gate.stepped.set()
        if gate.thread is not None:
            gate.thread.join()
    return gate
