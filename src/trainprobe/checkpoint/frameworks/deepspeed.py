"""DeepSpeed: ``save_checkpoint`` writes a ``global_step<N>/`` folder (the tag) with the model states
(``mp_rank_00_model_states.pt``: ``module``, ``global_steps``, ``lr_scheduler``, ``ds_config``...) and, with
ZeRO, one optimizer partition per data-parallel rank (``zero_pp_rank_<r>_mp_rank_00_optim_states.pt``:
flat fp32 partitions and the base optimizer's state over them), and a ``latest`` file beside the folder
naming the newest tag. ``global_steps`` counts optimizer steps (fp16 overflow steps included)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from trainprobe.checkpoint.frameworks.base import OPTIMIZER_STEPS, Layout, Part, TensorRole, role_by_name

_MARKER = re.compile(r"(_model_states\.pt|_optim_states\.pt)$")


class DeepSpeed:
    name = "deepspeed"
    counts: ClassVar[Mapping[str, str]] = {
        "name": OPTIMIZER_STEPS,
        "step field": OPTIMIZER_STEPS,
        "scheduler": OPTIMIZER_STEPS,
    }

    def layout(self, folder: str, files: Sequence[str], dirs: Sequence[str]) -> Layout | None:
        if not any(_MARKER.search(f) for f in files):
            return None
        return Layout(self.name, [Part(os.path.join(folder, f), role_by_name(f)) for f in files])

    def knows(self, objects: Any) -> bool:
        return isinstance(objects, dict) and "ds_version" in objects

    def tensor_role(self, name: str) -> TensorRole | None:
        if name.startswith("module."):
            return "weights"
        if name.startswith(("optimizer_state_dict.", "optimizer.")):
            return "optimizer"
        return None
