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
    Need,
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
    # _save_checkpoint writes the model and trainer_state.json always, and optimizer.pt, scheduler.pt and
    # rng_state*.pth together unless save_only_model (then none of them); resume loads the optimizer and
    # scheduler only when both files are there, else it goes on silently with fresh ones. scheduler.pt is
    # not required: under DeepSpeed a scheduler DeepSpeed owns is saved in global_stepN/. save_model, the
    # final save, writes the model and training_args.bin alone: no trainer_state.json is due there.
    needs: ClassVar[Sequence[Need]] = (
        Need("weights", "the Trainer's resume and from_pretrained find no model to load"),
        Need(
            "optimizer",
            "the Trainer saves it with scheduler.pt and rng_state, and resumes with a fresh optimizer "
            "without it",
            when=("scheduler", "rng"),
        ),
        Need(
            "config",
            "resume reads the step, epoch and log history from it, and starts them over without it",
            when=("optimizer", "scheduler", "rng"),
            names=("trainer_state.json",),
        ),
    )

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
