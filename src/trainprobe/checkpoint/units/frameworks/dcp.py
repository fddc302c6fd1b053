"""torch.distributed.checkpoint (DDP, FSDP, FSDP2): a folder with ``.metadata`` and ``__<rank>_<i>.distcp``
files, read whole as one part. FSDP2 state dicts name optimizer state by parameter FQN
(``optim.state.<fqn>.exp_avg``), each tensor split in one chunk per rank."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from trainprobe.checkpoint.reading.formats.dcp import METADATA
from trainprobe.checkpoint.units.frameworks.base import OPTIMIZER_STEPS, FrameworkBase, Layout, Part


class Dcp(FrameworkBase):
    name = "dcp"
    # The step is the user's (a folder name, a train_state entry) and may count micro-batches.
    exact_steps = False
    counts: ClassVar[Mapping[str, str]] = {"name": OPTIMIZER_STEPS, "step field": OPTIMIZER_STEPS}

    def layout(self, folder: str, files: Sequence[str], dirs: Sequence[str]) -> Layout | None:
        if METADATA not in files:
            return None
        return Layout(self.name, [Part(folder, "state")])
