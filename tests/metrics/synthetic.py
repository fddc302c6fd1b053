"""Synthetic training logs: the seed's story (for tests), and big logs in every line shape the text reader
knows (benchmarks/logs.py). Imported as ``metrics.synthetic`` (tests/ is on the path)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import numpy as np

SEED_SAVES = {2000: 169.5, 4001: 99.5}  # step of the save -> seconds logging stalled during it
SEED_SPIKES = {2029: 13.0, 4021: 7.2}
SEED_CLIFF = 4229


def seed_story_lines(n_steps: int = 5000, *, seed: int = 0, start: float = 1_790_000_000.0) -> Iterator[str]:
    """Loss ~0.8 → 13.0 at step 2029 and ~0.7 → 7.2 at step 4021, each after a checkpoint save (steps 2000
    and 4001) that stalled logging 170 s / 100 s; an accuracy cliff at 4229 (0.15 → 0.005) with no save or
    stall near it."""
    rng = np.random.default_rng(seed)
    wall = start
    for step in range(n_steps):
        wall += 0.5 + rng.normal(0, 0.02)
        base = 0.7 + 1.8 * np.exp(-step / 400) + (0.1 if step < 4001 else 0.0) * min(1.0, step / 2000)
        loss = base * (1 + rng.normal(0, 0.02))
        for at, peak in SEED_SPIKES.items():
            if at <= step < at + 12:
                loss = base + (peak - base) * np.exp(-(step - at) / 1.5)
        acc = (0.15 if step < SEED_CLIFF else 0.005) * (1 + rng.normal(0, 0.03))
        stamp = dt.datetime.fromtimestamp(wall, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        yield f"{stamp} step {step} | loss {loss:.4f} | acc {acc:.4f}"
        if step in SEED_SAVES:
            yield f"{stamp} Saving checkpoint to checkpoints/step-{step}.pt"
            wall += SEED_SAVES[step]


def write_seed_story(path: Path, n_steps: int = 5000) -> Path:
    path.write_text("\n".join(seed_story_lines(n_steps)) + "\n", encoding="utf-8")
    return path


def write_uniform_log(path: Path, n_rows: int, *, fmt: str, seed: int = 0, block: int = 1_000_000) -> int:
    """A big log of ``n_rows`` rows (``fmt`` "jsonl" or "text"), written block by block; returns its size in
    bytes."""
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for start in range(0, n_rows, block):
            n = min(block, n_rows - start)
            steps = np.arange(start, start + n)
            loss = 0.7 + 2.0 * np.exp(-steps / 1e6) + rng.normal(0, 0.02, n)
            lr = np.full(n, 3e-4)
            loss_s = np.char.mod("%.4f", loss)
            lr_s = np.char.mod("%.2e", lr)
            step_s = steps.astype(str)
            if fmt == "jsonl":
                lines = np.char.add(np.char.add(np.char.add('{"step": ', step_s), ', "loss": '), loss_s)
                lines = np.char.add(np.char.add(np.char.add(lines, ', "lr": '), lr_s), "}")
            else:
                lines = np.char.add(np.char.add(np.char.add("step ", step_s), " | loss "), loss_s)
                lines = np.char.add(np.char.add(lines, " | lr "), lr_s)
            fh.write("\n".join(lines.tolist()))
            fh.write("\n")
    return path.stat().st_size


# One line per step in the shape real loggers print (the benchmark reads each); ``{i}`` the step, ``{w}`` a
# wall clock, ``{loss}`` a loss. Each is a format string over numpy-built columns.
SHAPES: dict[str, str] = {
    "pipes": "step {i} | loss {loss:.4f} | lr 3.00e-04",
    "key=value": "step={i} loss={loss:.6f} lr=0.0003 grad_norm={gn:.4f}",
    "python logging": "{stamp} INFO step={i} loss={loss:.6f} lr=0.0003",
    "loguru": "{stamp} | INFO     | trainer:step:88 - it={i} loss={loss:.4f} acc={acc:.4f}",
    "glog": "I1129 {hms}.{us:06d}  4567 train.py:88] step {i} loss {loss:.4f}",
    "llm.c": "s:{i} trl:{loss:.4f} lr:0.0006 norm:{gn:.2f}",
    "modded-nanogpt": "step:{i}/6200 train_loss:{loss:.4f} train_time:{ms}ms step_avg:213.40ms",
    "megatron": (
        " iteration {i:8d}/  159576 | consumed samples: {samples:12d} |"
        " elapsed time per iteration (ms): 18333.4 | learning rate: 6.000E-05 | global batch size:    96 |"
        " lm loss: {loss:.6E} | loss scale: 2048.0 | grad norm: {gn:.3f} | num zeros: 0.0 |"
        " number of skipped iterations:   0 | number of nan iterations:   0 |"
    ),
    "hf-trainer dict": (
        "{{'loss': {loss:.4f}, 'grad_norm': {gn:.4f}, 'learning_rate': 1e-05, 'epoch': {epoch:.2f}}}"
    ),
    "pytorch examples": "Train Epoch: {epoch_i} [{seen}/60000 ({pct:.0f}%)]\tLoss: {loss:.6f}",
    "jsonl": '{{"step": {i}, "loss": {loss:.4f}, "lr": 3.00e-04}}',
}


def write_shape_log(path: Path, n_rows: int, shape: str, *, seed: int = 0, block: int = 200_000) -> int:
    """A log of ``n_rows`` lines of one of ``SHAPES``, written block by block; returns its size in bytes."""
    fmt = SHAPES[shape]
    rng = np.random.default_rng(seed)
    start = dt.datetime(2026, 11, 29, 22, 36, 21)
    with open(path, "w", encoding="utf-8") as fh:
        for first in range(0, n_rows, block):
            n = min(block, n_rows - first)
            steps = np.arange(first, first + n)
            loss = 0.7 + 2.0 * np.exp(-steps / 1e6) + rng.normal(0, 0.02, n)
            gn = np.abs(1.0 + rng.normal(0, 0.1, n))
            out = []
            for j in range(n):
                i = int(steps[j])
                fields: dict[str, object] = {
                    "i": i,
                    "loss": float(loss[j]),
                    "gn": float(gn[j]),
                    "acc": 0.5,
                    "ms": 213 * i,
                }
                if "{stamp}" in fmt or "{hms}" in fmt:
                    when = start + dt.timedelta(milliseconds=37 * i)
                    fields["stamp"] = f"{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d}"
                    fields["hms"] = f"{when:%H:%M:%S}"
                    fields["us"] = when.microsecond
                fields["samples"] = 96 * i
                fields["epoch"] = i / 1000
                fields["epoch_i"] = 1 + i // 938
                fields["seen"] = (i % 938) * 64
                fields["pct"] = 100 * (i % 938) / 938
                out.append(fmt.format(**fields))
            fh.write("\n".join(out))
            fh.write("\n")
    return path.stat().st_size
