"""Hugging Face: a Trainer's ``checkpoint-N/`` (and a saved model folder).

``Trainer._save_checkpoint`` writes, in one folder named by the global step: the model
(``model.safetensors``, ``pytorch_model.bin`` or shards with their ``*.index.json``; ``adapter_model.*`` for
PEFT), ``optimizer.pt``, ``scheduler.pt``, ``rng_state.pth`` (``rng_state_<rank>.pth`` on several ranks),
``scaler.pt`` with fp16, ``trainer_state.json`` (``global_step``: optimizer steps), ``training_args.bin``
(a pickled TrainingArguments) and ``config.json``. Under DeepSpeed the model and optimizer states live in a
``global_stepN/`` sub-folder, under FSDP in DCP sub-folders (``pytorch_model_fsdp_0/``, ``optimizer_0/``).
The scheduler steps once per optimizer step, so its ``last_epoch`` counts optimizer steps too."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import ClassVar

from trainprobe.checkpoint.units.frameworks.base import (
    OPTIMIZER_STEPS,
    STEP_COUNTS,
    FrameworkBase,
    Layout,
    Part,
    role_by_name,
)

_MARKERS = ("trainer_state.json", "training_args.bin")
_WEIGHTS = re.compile(r"^(model|pytorch_model|adapter_model)([-.].*)?\.(safetensors|bin)$|\.index\.json$")
_PART_DIRS = re.compile(r"^(global_step\d+|pytorch_model_fsdp_\d+|optimizer_\d+)$")


class HfTrainer(FrameworkBase):
    name = "hf-trainer"
    # global_step counts optimizer steps; without a grad scaler (scaler.pt) none is skipped
    exact_steps = True
    counts: ClassVar[Mapping[str, str]] = {
        **STEP_COUNTS,
        "trainer_state.json": OPTIMIZER_STEPS,
        "scheduler": OPTIMIZER_STEPS,
    }

    def layout(self, folder: str, files: Sequence[str], dirs: Sequence[str]) -> Layout | None:
        names = set(files)
        weights = any(_WEIGHTS.search(f) for f in files)
        if not (names & set(_MARKERS) or ("config.json" in names and weights)):
            return None
        layout = Layout(self.name if names & set(_MARKERS) else "hf-model")
        for f in files:
            layout.parts.append(Part(os.path.join(folder, f), role_by_name(f)))
        for d in dirs:
            if _PART_DIRS.match(d):
                sub = os.path.join(folder, d)
                layout.claimed_dirs.append(sub)
                if d.startswith("global_step"):
                    for f in sorted(os.listdir(sub)):
                        if os.path.isfile(os.path.join(sub, f)):
                            layout.parts.append(Part(os.path.join(sub, f), role_by_name(f)))
                else:
                    layout.parts.append(Part(sub, role_by_name(d, is_dir=True)))
        return layout
