"""Thin callbacks that save through :class:`trainprobe.save.CheckpointWriter` from training frameworks.

- :mod:`trainprobe.integrations.lightning`: ``CheckpointWriterCallback`` for PyTorch Lightning.
- :mod:`trainprobe.integrations.transformers`: ``CheckpointWriterCallback`` for the Hugging Face Trainer.

Each module imports its framework when it is imported, never before: ``import trainprobe.integrations`` needs
neither. The saving schedule (every N optimizer steps, global rank 0 only) is shared in :class:`SaveSchedule`.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainprobe.errors import UsageError


@dataclass
class SaveSchedule:
    """When a callback saves: every ``every_n_steps`` optimizer steps, once per step, and on the last one."""

    every_n_steps: int
    last_saved: int = -1

    def __post_init__(self) -> None:
        if self.every_n_steps < 1:
            raise UsageError(f"every_n_steps must be at least 1 (got {self.every_n_steps})")

    def due(self, global_step: int) -> bool:
        if global_step <= 0 or global_step == self.last_saved or global_step % self.every_n_steps:
            return False
        self.last_saved = global_step
        return True

    def due_at_end(self, global_step: int) -> bool:
        if global_step <= 0 or global_step == self.last_saved:
            return False
        self.last_saved = global_step
        return True


def missing(framework: str, extra: str) -> ImportError:
    return ImportError(f"{framework} is not installed; install it (pip install {extra}) to use this callback")


__all__ = ["SaveSchedule", "missing"]
