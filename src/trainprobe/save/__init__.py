"""Saving training state safely: :class:`CheckpointWriter` (a consistent snapshot, written atomically in the
background).

torch is imported only when a writer is created, so ``import trainprobe.save`` works without it.
"""

from __future__ import annotations

from trainprobe.save.files import read_latest
from trainprobe.save.writer import CheckpointWriter

__all__ = ["CheckpointWriter", "read_latest"]
