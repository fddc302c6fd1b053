"""``diff``: what changed between two checkpoint units, tensor by tensor (:mod:`.run`; the per-tensor
comparison in :mod:`.tensors`). Imports only the standard library, numpy and trainprobe.checkpoint (shipped to
remote hosts)."""

from __future__ import annotations

from trainprobe.checkpoint.diff.run import DiffReport, diff_checkpoints, diff_paths, diff_paths_json

__all__ = ["DiffReport", "diff_checkpoints", "diff_paths", "diff_paths_json"]
