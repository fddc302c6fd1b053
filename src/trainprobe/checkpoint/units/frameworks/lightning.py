"""PyTorch Lightning: one ``.ckpt`` file (torch.save) holding ``state_dict`` (the LightningModule's weights),
``optimizer_states`` (a list of optimizer state dicts), ``lr_schedulers``, ``epoch``, ``global_step``
(optimizer steps), ``loops`` (progress counters), ``callbacks`` (e.g. ModelCheckpoint with ``inf``
placeholders in ``kth_value`` / ``best_model_score`` before a best exists, EarlyStopping's ``best_score``),
``hyper_parameters`` and the version. Everything but the weights and optimizer state is metadata: a
non-finite value there is a note, not a finding. It claims no folder (the default layout)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from trainprobe.checkpoint.units.frameworks.base import (
    EPOCHS,
    STEP_COUNTS,
    FrameworkBase,
    TensorRole,
)

_KEYS = ("pytorch-lightning_version", "lightning_version")


class Lightning(FrameworkBase):
    name = "lightning"
    # global_step counts optimizer steps; AMP (native_amp_scaling_state saved) may skip some
    exact_steps = True
    # global_step counts every optimizer.step() of every optimizer (two optimizers stepping once per batch
    # are at global_step 12 after 6 batches, with counters of 6 each)
    step_counts_every_optimizer = True
    # lr_schedulers step per epoch unless configured per step (the interval is not saved): not compared.
    counts: ClassVar[Mapping[str, str]] = {**STEP_COUNTS, "scheduler": EPOCHS}

    def knows(self, objects: Any) -> bool:
        if not isinstance(objects, dict):
            return False
        if any(k in objects for k in _KEYS):
            return True
        return "state_dict" in objects and ("loops" in objects or "optimizer_states" in objects)

    def tensor_role(self, name: str) -> TensorRole | None:
        if name.startswith("state_dict."):
            return "weights"
        if name.startswith("optimizer_states."):
            return "optimizer"
        return "metadata"
