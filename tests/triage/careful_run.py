"""The run of issue 23, for its acceptance test: what three engineers were given, and what the careful one
found in it that triage has to say. Trained once per test session with real torch (a small residual MLP on a
drifting classification stream, AdamW), logged through Python's ``logging`` on a simulated clock (so the
stall is the same on every machine at any load).

What is in it (:func:`careful_run`):

- ``train.log``, Python-logging shape (``2026-01-01 12:00:00,500 - INFO - step 1 | loss ... | tok/s
  51234``): ``tok/s`` is the same constant on every row, across the stall; the save lines name
  ``/root/ckpts/step_N`` (the run was copied from there since); the saves are at 20, 40, 60, 81 and 100 (a
  cadence of 20, one step off at 81).
- ``checkpoints/step_60``: the save at step 60 blocked the loop 171 s on the clock (the stream drifted on
  meanwhile, so the loss spikes when training resumes), then ``torch.save`` of the live state dicts ran in a
  background thread while the next step changed them: the real race tears it (its step counters disagree).
- ``checkpoints/step_81``: a fresh optimizer's state under the run's counters — a new AdamW stepped once on
  a copy of the live model (only the blocks' weights had a gradient, every other parameter a zero gradient),
  its counters then set to 81. The race cannot produce this (it mixes two of the run's own steps), so the
  unit is built with torch, as a trainer that re-creates its optimizer and restores only the step counters
  would write it.
- ``checkpoints/step_100``: a stale relabel — step 40's tensors as saved then, under a step field and
  counters of 100, with a few NaN in one weight (a cached state saved again, relabelled).
- ``checkpoints/step_70``: a byte copy of ``step_40`` under a name that says 70 (no save line wrote it), and
  ``checkpoints/step_0``: the initial weights, saved before training by code that logs nothing.
- From step 90 the eval labels are inverted (the eval pipeline breaks): the accuracy falls off a cliff while
  the training loss holds steady.
"""

from __future__ import annotations

import atexit
import copy
import datetime as dt
import functools
import logging
import math
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from triage.runs import _readable

STEPS = 120
SAVES = (20, 40, 60, 81, 100)
STALLED, FRESH, STALE = 60, 81, 100
STALE_OF = 40  # the unit whose tensors the stale save holds
COPY_OF, COPY_NAME = 40, 70
EVAL_BREAKS = 90
RATE = 51234
LOG_DIR = "/root/ckpts"  # where the log says it saved
STEP_S, STALL_S, SAVE_S = 0.5, 171.0, 0.2
STALE_NAN = 5
LR = 1e-2
START = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.timezone.utc)

_WIDTH, _LAYERS, _BATCH, _EVAL_BATCH = 32, 8, 128, 512
_DRIFT_PER_S = 0.006  # radians the stream's boundary turns per second on the clock: 1 over the stall
_OFFSET = 1.0  # the boundary sits off the origin: most samples are positive, so inverted labels score low


def units(run: Path) -> dict[str, Path]:
    """The units by folder name (``step_60``), each a one-file folder."""
    return {p.parent.name: p for p in sorted((run / "checkpoints").glob("*/state.pt"))}


@functools.cache
def careful_run() -> Path:
    """The run dir of the module doc (``run/``, in a directory every test user can read)."""
    torch = pytest.importorskip("torch")
    root = Path(tempfile.mkdtemp(prefix="tp-triage-careful-"))
    atexit.register(shutil.rmtree, root, True)
    run = root / "run"
    (run / "checkpoints").mkdir(parents=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bit-identical from run to run, and no contention on a busy machine
    try:
        _Training(torch, run).train()
    finally:
        torch.set_num_threads(threads)
    (run / "checkpoints" / f"step_{COPY_NAME}").mkdir()
    shutil.copy2(_unit(run, COPY_OF), _unit(run, COPY_NAME))
    _readable(root)
    return run


def _unit(run: Path, step: int) -> Path:
    return run / "checkpoints" / f"step_{step}" / "state.pt"


@dataclass
class _Training:
    torch: Any
    run: Path
    clock_s: float = 0.0
    saved: dict[int, dict[str, Any]] = field(default_factory=dict)

    def train(self) -> None:
        from trainprobe.demo.race import build_model, finish_saves

        torch = self.torch
        self.model = build_model(_LAYERS, _WIDTH, seed=0)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=LR, weight_decay=0.01)
        gen = torch.Generator().manual_seed(1)
        a, b = torch.randn(_WIDTH, generator=gen), torch.randn(_WIDTH, generator=gen)
        b -= (a @ b) / (a @ a) * a
        self.directions, self.gen = (a / a.norm(), b / b.norm()), gen
        self._save(0, {"step": 0, "model": self.model.state_dict()})
        log, close = _python_log(self.run / "train.log", lambda: self.clock_s)
        gates: list[Any] = []
        try:
            for step in range(1, STEPS + 1):
                loss = self._step(gates)
                self.clock_s += STEP_S
                acc = self._accuracy(inverted=step >= EVAL_BREAKS)
                log.info("step %d | loss %.4f | acc %.4f | lr %g | tok/s %d", step, loss, acc, LR, RATE)
                if step in SAVES:
                    log.info("Saving checkpoint to %s/step_%d", LOG_DIR, step)
                    gates.extend(self._save_at(step))
        finally:
            finish_saves(gates)
            close()

    def _boundary(self) -> Any:
        angle = _DRIFT_PER_S * self.clock_s
        return math.cos(angle) * self.directions[0] + math.sin(angle) * self.directions[1]

    def _batch(self, size: int) -> tuple[Any, Any]:
        x = self.torch.randn(size, _WIDTH, generator=self.gen)
        return x, (x @ self._boundary() > -_OFFSET).float().unsqueeze(1)

    def _step(self, gates: list[Any]) -> float:
        from trainprobe.demo.race import held_saves

        x, y = self._batch(_BATCH)
        loss = self.torch.nn.functional.binary_cross_entropy_with_logits(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        with held_saves(gates):  # a racing save is half-way through the live tensors this step changes
            self.optimizer.step()
        return float(loss.item())

    def _accuracy(self, *, inverted: bool) -> float:
        with self.torch.no_grad():
            x, y = self._batch(_EVAL_BATCH)
            labels = 1 - y if inverted else y  # the broken eval pipeline's label map
            return float(((self.model(x) > 0).float() == labels).float().mean().item())

    def _save_at(self, step: int) -> list[Any]:
        """The save the module doc says for ``step``; the racing save's gate, to hold the next step on."""
        from trainprobe.demo.race import naive_save, tensor_bytes

        if step == STALLED:
            self.clock_s += STALL_S
            state = {"step": step, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
            path = _unit(self.run, step)
            path.parent.mkdir()
            return [naive_save(self.torch, state, path, tensor_bytes(state, self.torch) // 2)]
        self.clock_s += SAVE_S
        if step == FRESH:
            self._save(step, {"step": step, "model": self.model.state_dict(), "optimizer": self._fresh(step)})
        elif step == STALE:
            self._save(step, _relabelled(self.torch, self.saved[STALE_OF], step))
        else:
            state = {"step": step, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
            self._save(step, state)
        return []

    def _fresh(self, step: int) -> dict[str, Any]:
        """A new AdamW's state after one step on a copy of the live model, its counters set to ``step``:
        the blocks' weights get this batch's gradient, every other parameter a zero gradient."""
        torch = self.torch
        model = copy.deepcopy(self.model)
        fresh = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
        x, y = self._batch(_BATCH)
        torch.nn.functional.binary_cross_entropy_with_logits(model(x), y).backward()
        for name, p in model.named_parameters():
            if not (name.startswith("blocks.") and name.endswith(".weight")):
                p.grad = torch.zeros_like(p)
        fresh.step()
        state = fresh.state_dict()
        for entry in state["state"].values():
            entry["step"] = torch.tensor(float(step))
        return state

    def _save(self, step: int, state: dict[str, Any]) -> None:
        path = _unit(self.run, step)
        path.parent.mkdir()
        self.saved[step] = copy.deepcopy(state)
        self.torch.save(state, path)


def _relabelled(torch: Any, state: dict[str, Any], step: int) -> dict[str, Any]:
    stale = copy.deepcopy(state)
    stale["step"] = step
    for entry in stale["optimizer"]["state"].values():
        entry["step"] = torch.tensor(float(step))
    stale["model"]["blocks.3.weight"][0, :STALE_NAN] = float("nan")
    return stale


def _python_log(path: Path, clock_s: Callable[[], float]) -> tuple[logging.Logger, Callable[[], None]]:
    """A logger writing ``%(asctime)s - %(levelname)s - %(message)s`` to ``path``, stamped in UTC with the
    simulated clock instead of the time the line is written."""
    logger = logging.getLogger(f"tp-careful-{id(path)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.FileHandler(path, encoding="utf-8")
    formatter = logging.Formatter("%(asctime)s - %(levelname)s - %(message)s")
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)

    def stamp(record: logging.LogRecord) -> bool:
        record.created = START.timestamp() + clock_s()
        record.msecs = round(clock_s() * 1000) % 1000
        return True

    handler.addFilter(stamp)
    logger.addHandler(handler)

    def close() -> None:
        logger.removeHandler(handler)
        handler.close()

    return logger, close


SLOW_STEPS, SLOW_SAVES, SLOW_FROZEN = 20, (10, 20), 4


@functools.cache
def slow_run() -> Path:
    """The healthy control: the same model, its first :data:`SLOW_FROZEN` blocks frozen (no gradient, no
    optimizer state), the rest trained at a learning rate of 1e-6 on a stream that does not drift, saved in
    the loop at :data:`SLOW_SAVES` (consecutive saves whose frozen tensors are bit-identical and whose
    moments moved), logged through Python's ``logging`` with the save lines naming the units where they are
    and a throughput measured per step."""
    torch = pytest.importorskip("torch")
    from trainprobe.demo.race import build_model

    root = Path(tempfile.mkdtemp(prefix="tp-triage-slow-"))
    atexit.register(shutil.rmtree, root, True)
    run = root / "run"
    (run / "checkpoints").mkdir(parents=True)
    torch.manual_seed(0)
    model = build_model(_LAYERS, _WIDTH, seed=0)
    for block in list(model.blocks)[:SLOW_FROZEN]:
        block.requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6)
    gen = torch.Generator().manual_seed(1)
    boundary = torch.randn(_WIDTH, generator=gen)
    clock = [0.0]
    log, close = _python_log(run / "train.log", lambda: clock[0])
    try:
        for step in range(1, SLOW_STEPS + 1):
            began = time.perf_counter()
            x = torch.randn(_BATCH, _WIDTH, generator=gen)
            y = (x @ boundary > -_OFFSET).float().unsqueeze(1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            rate = _BATCH / max(time.perf_counter() - began, 1e-9)  # measured: it moves from step to step
            clock[0] += STEP_S
            log.info("step %d | loss %.4f | tok/s %.1f", step, float(loss.item()), rate)
            if step in SLOW_SAVES:
                path = _unit(run, step)
                log.info("Saving checkpoint to %s", path.parent)
                path.parent.mkdir()
                torch.save(
                    {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, path
                )
                clock[0] += SAVE_S
    finally:
        close()
    _readable(root)
    return run
