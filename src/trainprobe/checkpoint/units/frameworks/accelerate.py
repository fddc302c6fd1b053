"""accelerate's ``Accelerator.save_state``: a folder (``checkpoint_<i>`` with automatic naming, where ``i``
counts saves, not steps) with ``model.safetensors`` / ``pytorch_model.bin`` (``model_1`` for a second model),
``optimizer.bin`` (``optimizer_1.bin``...), ``scheduler.bin``, ``sampler.bin``, ``scaler.pt``,
``random_states_<rank>.pkl`` (torch.save of the RNG states) and ``custom_checkpoint_<i>.pkl``; FSDP writes DCP
sub-folders (``pytorch_model_fsdp_0``, ``optimizer_0``)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import ClassVar

from trainprobe.checkpoint.units.frameworks.base import (
    SAVES,
    FrameworkBase,
    Layout,
    Need,
    Part,
    role_by_name,
)

_MARKER = re.compile(r"^(random_states_\d+\.pkl|optimizer(_\d+)?\.bin|scheduler(_\d+)?\.bin)$")
_PART_DIRS = re.compile(r"^(pytorch_model_fsdp_\d+|optimizer_\d+)$")


class Accelerate(FrameworkBase):
    name = "accelerate"
    # the optimizer steps once per step (its counters are the step: the folder counts saves)
    exact_steps = True
    # load_state loads every model and optimizer it prepared from its file (a missing one raises); a model a
    # save hook writes itself lands in a sub-folder (diffusers' unet/), which counts
    needs: ClassVar[Sequence[Need]] = (
        Need("weights", "Accelerator.load_state finds no model file to load"),
        Need(
            "optimizer",
            "a scheduler is saved with its optimizer: load_state finds no optimizer file",
            when=("scheduler",),
        ),
    )

    def name_counts(self, separator: str) -> str:
        # its automatic naming (checkpoint_<i>) counts saves, not steps
        return SAVES if separator == "_" else super().name_counts(separator)

    def layout(self, folder: str, files: Sequence[str], dirs: Sequence[str]) -> Layout | None:
        if not any(_MARKER.match(f) for f in files):
            return None
        layout = Layout(self.name, [Part(os.path.join(folder, f), role_by_name(f)) for f in files])
        for d in dirs:
            if _PART_DIRS.match(d):
                sub = os.path.join(folder, d)
                layout.claimed_dirs.append(sub)
                layout.parts.append(Part(sub, role_by_name(d, is_dir=True)))
        return layout
