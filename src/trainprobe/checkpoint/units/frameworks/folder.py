"""A plain folder that is one checkpoint: model and optimizer (and maybe scheduler) saved side by side by a
hand-written loop (``step_500/model.pt`` + ``optimizer.pt``), and plain single files (``torch.save`` of a
training dict, safetensors)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from trainprobe.checkpoint.units.frameworks.base import (
    FrameworkBase,
    Layout,
    Part,
    role_by_name,
)


class Folder(FrameworkBase):
    name = "folder"
    # The folder is one save named by the step the loop was at (step_500/): without a grad scaler saved
    # beside it, an optimizer file behind that step is a stale one.
    exact_steps = True

    def layout(self, folder: str, files: Sequence[str], dirs: Sequence[str]) -> Layout | None:
        roles = [role_by_name(f) for f in files]
        if "optimizer" not in roles or not ({"weights", "state"} & set(roles)):
            return None
        return Layout(
            self.name, [Part(os.path.join(folder, f), r) for f, r in zip(files, roles, strict=True)]
        )


class PlainFile(FrameworkBase):
    """Any single checkpoint file no framework claims (the last entry of the registry)."""

    name = "file"
    # A step field of a hand-written loop may count micro-batches or include skipped steps.
    exact_steps = False

    def knows(self, objects: Any) -> bool:
        return True
