"""torch.distributed.checkpoint (DDP, FSDP, FSDP2): a folder with ``.metadata`` and ``__<rank>_<i>.distcp``
files, read whole as one part. FSDP2 state dicts name optimizer state by parameter FQN
(``optim.state.<fqn>.exp_avg``), each tensor split in one chunk per rank."""

from __future__ import annotations

from collections.abc import Sequence

from trainprobe.checkpoint.reading.formats.dcp import METADATA
from trainprobe.checkpoint.units.frameworks.base import FrameworkBase, Layout, Part


class Dcp(FrameworkBase):
    name = "dcp"
    # The step is the user's (a folder name, a train_state entry) and may count micro-batches.
    exact_steps = False
    # counts: STEP_COUNTS (its scheduler, if any, is the user's: not compared)

    def layout(self, folder: str, files: Sequence[str], dirs: Sequence[str]) -> Layout | None:
        if METADATA not in files:
            return None
        return Layout(self.name, [Part(folder, "state")])
