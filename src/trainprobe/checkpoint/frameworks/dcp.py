"""torch.distributed.checkpoint (DDP, FSDP, FSDP2): a folder with ``.metadata`` and ``__<rank>_<i>.distcp``
files, read whole as one part. FSDP2 state dicts name optimizer state by parameter FQN
(``optim.state.<fqn>.exp_avg``), each tensor split in one chunk per rank."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from trainprobe.checkpoint.formats.dcp import METADATA
from trainprobe.checkpoint.frameworks.base import OPTIMIZER_STEPS, Layout, Part, TensorRole

if TYPE_CHECKING:
    from trainprobe.checkpoint.base import Checkpoint
    from trainprobe.checkpoint.evidence import Evidence
    from trainprobe.checkpoint.identity import PartFacts


class Dcp:
    name = "dcp"
    # The step is the user's (a folder name, a train_state entry) and may count micro-batches.
    exact_steps = False
    counts: ClassVar[Mapping[str, str]] = {"name": OPTIMIZER_STEPS, "step field": OPTIMIZER_STEPS}

    def layout(self, folder: str, files: Sequence[str], dirs: Sequence[str]) -> Layout | None:
        if METADATA not in files:
            return None
        return Layout(self.name, [Part(folder, "state")])

    def knows(self, objects: Any) -> bool:
        return False

    def tensor_role(self, name: str) -> TensorRole | None:
        return None

    def part_facts(self, path: str, ckpt: Checkpoint) -> dict[str, Any]:
        return {}

    def parts_evidence(self, parts: Sequence[Part], facts: Sequence[PartFacts]) -> list[Evidence]:
        return []
