"""What each tensor of a unit's part is: ``weights``, ``optimizer`` or ``metadata``. Non-finite values are
findings only in the first two (a Lightning callback's ``inf`` score is metadata). Stdlib + numpy only."""

from __future__ import annotations

from trainprobe.checkpoint.reading.base import Checkpoint, TensorRecord
from trainprobe.checkpoint.reading.skeleton import fields_of, optimizer_prefixes
from trainprobe.checkpoint.units.frameworks import Framework, Role, TensorRole


def tensor_roles(ckpt: Checkpoint, role: Role, framework: Framework) -> list[TensorRole]:
    """The role of each of ``ckpt.records``, in order."""
    if role == "weights":
        return ["weights"] * len(ckpt.records)
    if role == "optimizer":
        return ["optimizer"] * len(ckpt.records)
    if role in ("scheduler", "rng", "config", "metadata"):
        return ["metadata"] * len(ckpt.records)
    states = tuple(f"{p}.state." if p else "state." for p in optimizer_prefixes(ckpt.objects))
    top = fields_of(ckpt.objects)
    # A bare state dict (all tensors) holds weights only, its scalars included.
    mostly_tensors = isinstance(top, dict) and sum(
        isinstance(v, TensorRecord) for v in top.values()
    ) * 2 >= len(top)
    out: list[TensorRole] = []
    for rec in ckpt.records:
        said = framework.tensor_role(rec.name)
        if said is not None:
            out.append(said)
        elif rec.name.startswith(states) or rec.param_name is not None:
            out.append("optimizer")
        elif rec.shape == () and "." not in rec.name and not mostly_tensors:
            out.append("metadata")  # a top-level scalar beside other values: a loss, a score, a counter
        else:
            out.append("weights")
    return out
