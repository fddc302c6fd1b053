"""Files whose names say they are members of a set that a descriptor file holds together, found without it:
the shards of a Hugging Face sharded checkpoint (``model-00001-of-00004.safetensors``) without the
``*.index.json`` that maps tensors to shards, and torch.distributed.checkpoint data files (``__0_0.distcp``)
without the ``.metadata`` that says where each tensor's chunks are. Every tensor of such a file reads, yet
the checkpoint's own loader cannot load it: the descriptor is part of the unit, and its absence is damage.
Stdlib only."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.evidence import Evidence

#: a shard of a Hugging Face sharded save: the shard's number and how many the save wrote
HF_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.(?:safetensors|bin)$")
#: a torch.distributed.checkpoint data file (rank, file index)
DCP_DATA = re.compile(r"^__\d+_\d+\.distcp$")
DCP_METADATA = ".metadata"


def missing_descriptor_evidence(paths: Sequence[str], listed: Sequence[str], *, here: bool) -> list[Evidence]:
    """A failed check for set members among a unit's ``paths`` (its parts) whose descriptor is not among
    the unit's files (``listed`` too); ``here``: the files are on this machine, so a DCP data file's
    folder is looked at for its ``.metadata`` (a unit of one such file lists no sibling)."""
    out = []
    names = [os.path.basename(p) for p in [*paths, *listed]]
    shards = sorted(n for n in names if HF_SHARD.search(n))
    if shards and not any(n.endswith(".index.json") for n in names):
        declared = max(int(m.group(2)) for n in shards if (m := HF_SHARD.search(n)))
        out.append(
            Evidence(
                "shard-index", "fail",
                f"{len(shards)} shard(s) of a sharded save of {declared} ({shards[0]} …) without the "
                "*.index.json that maps tensors to shards: from_pretrained cannot load them",
                indicates=V.CORRUPT, values={"shards": shards, "declared": declared},
            )
        )  # fmt: skip
    if here:
        for path in paths:
            name, folder = os.path.basename(path), os.path.dirname(path)
            if not DCP_DATA.match(name) or os.path.exists(os.path.join(folder, DCP_METADATA)):
                continue
            out.append(
                Evidence(
                    "dcp-metadata", "fail",
                    f"{name} is a torch.distributed.checkpoint data file and its folder has no "
                    f"{DCP_METADATA}: the checkpoint's index of chunks is missing, so "
                    "torch.distributed.checkpoint cannot load it",
                    indicates=V.CORRUPT,
                )
            )  # fmt: skip
    return out


__all__ = ["DCP_DATA", "HF_SHARD", "missing_descriptor_evidence"]
