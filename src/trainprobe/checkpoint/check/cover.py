"""``optimizer-covers-model``: inside a unit, the optimizer state belongs to the unit's model, one entry per
parameter, and covers every parameter the optimizer trains.

Two ways to pair state with weights, whichever the checkpoint allows:

- by name, where the optimizer state is keyed by parameter name (DCP/FSDP2 ``optimizer.state.<fqn>``): every
  state key is a weight of the model, and every weight has state (a weight without state is listed: frozen, or
  the state was saved for part of the model);
- by shape, where it is keyed by index (``torch.optim``'s ``state.12``) and the weights are in another file
  (HF ``optimizer.pt`` beside ``model.safetensors``): the state entries' shapes, as a multiset, must fit into
  the weights' shapes one to one (each entry its own weight), and the optimizer's ``param_groups`` may not
  name more parameters than the model has. Weights no entry can claim are listed (frozen parameters).

Flat partitions (DeepSpeed ZeRO: the framework's ``zero-partitions`` evidence), factored (Adafactor) and
quantized (8-bit) state are not shaped like their parameters: not paired by shape.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.check.optimizers import family_of
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.reading.base import Checkpoint, TensorRecord
from trainprobe.checkpoint.reading.skeleton import fields_of, find_optimizers
from trainprobe.checkpoint.units.frameworks.base import Framework

_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")
_MAX = 8


def _is_weight(rec: TensorRecord) -> bool:
    info = rec.dtype_info
    return info is not None and info.is_floating and not rec.name.endswith(_BUFFERS)


def _param_count(opt: dict[str, Any]) -> int:
    total = 0
    for group in opt["param_groups"]:
        group = fields_of(group)
        params = group.get("params") if isinstance(group, dict) else None
        total += len(params) if isinstance(params, list) else 0
    return total


def _state_shape(entry: Any) -> tuple[int, ...] | None:
    """The shape of a parameter's state (its first non-scalar tensor), when its family keeps it
    parameter-shaped; None for factored, quantized or unknown state."""
    entry = fields_of(entry)
    if not isinstance(entry, dict):
        return None
    family = family_of({k for k, v in entry.items() if v is not None} - {"step"})
    if family is None or not family.shaped_like_param:
        return None
    for value in entry.values():
        if isinstance(value, TensorRecord) and value.shape != ():
            return value.shape
    return None


def _shape_list(entry: Any) -> list[int] | None:
    shape = _state_shape(entry)
    return list(shape) if shape is not None else None


def _base(name: str) -> str:
    return name.rsplit("@", 1)[0]  # a DCP chunk's tensor


def cover_facts(path: str, role: str, ckpt: Checkpoint) -> dict[str, Any]:
    """What ``optimizer-covers-model`` needs of one part (JSON-able: read where the part is): its weights
    (name, shape) and, for a part that may hold optimizer state, each optimizer's state keys (by name) or
    state shapes and parameter count (by index)."""
    weights = [[r.name, list(r.shape)] for r in ckpt.records if _is_weight(r)]
    optimizers: list[dict[str, Any]] = []
    if role in ("optimizer", "state"):
        for label, opt in find_optimizers(ckpt.objects):
            state = opt["state"]
            by_name = bool(state) and all(isinstance(k, str) and not k.isdigit() for k in state)
            optimizers.append(
                {
                    "label": label,
                    "by_name": by_name,
                    "keys": [str(k) for k in state] if by_name else [],
                    "shapes": [] if by_name else [[str(pid), _shape_list(e)] for pid, e in state.items()],
                    "params": 0 if by_name else _param_count(opt),
                }
            )
    return {"path": path, "role": role, "weights": weights, "optimizers": optimizers}


def cover_from_facts(parts: Sequence[dict[str, Any]], framework: Framework) -> list[Evidence]:
    """The ``optimizer-covers-model`` evidence of a unit from each part's :func:`cover_facts` (nothing when
    it has no optimizer state or no weights beside it; pure: the parts may have been read on other
    machines)."""
    if framework.covers_by_partition:
        return []  # flat partitions: the framework's own parts_evidence says whether they cover the model
    out: list[Evidence] = []
    for part in parts:
        for opt in part["optimizers"]:
            where = f"{os.path.basename(part['path'])}: {opt['label']}"
            if opt["by_name"]:
                out.extend(_by_name(where, opt["keys"], part["weights"]))
            elif part["role"] == "optimizer":
                weights = [tuple(s) for p in parts if p["role"] == "weights" for _n, s in p["weights"]]
                files = ", ".join(os.path.basename(p["path"]) for p in parts if p["role"] == "weights")
                if weights:
                    out.append(_by_shape(where, opt, weights, files))
    return out


def _by_name(where: str, state: list[str], records: list[list[Any]]) -> list[Evidence]:
    state_names = {f".state.{k}." for k in state}
    weights: dict[str, str] = {}  # parameter name -> the record name it was found under
    for record_name, _shape in records:
        name = _base(record_name)
        if ".state." not in f".{name}." and not any(s in f".{name}." for s in state_names):
            weights.setdefault(name.split(".", 1)[1] if "." in name else name, name)
    if not weights:
        return []
    extra = [k for k in state if k not in weights]
    keys = set(state)
    missing = [n for n in weights if n not in keys]
    if extra:
        return [
            Evidence(
                "optimizer-covers-model",
                "fail",
                f"{where}: {len(extra)} state entr(ies) for parameters the model does not have, e.g. "
                f"{extra[0]} — the optimizer state was saved for another model",
                indicates=V.CORRUPT,
                tensors=extra[:_MAX],
            )
        ]
    if missing:
        return [
            Evidence(
                "optimizer-covers-model",
                "note",
                f"{where}: {len(missing)} of the model's {len(weights)} weights have no optimizer state, "
                f"e.g. {missing[0]} (frozen, or state saved for part of the model)",
                tensors=missing[:_MAX],
            )
        ]
    return [
        Evidence(
            "optimizer-covers-model",
            "pass",
            f"{where}: optimizer state for every one of the model's {len(weights)} weights, by name",
        )
    ]


def _by_shape(where: str, opt: dict[str, Any], weights: list[tuple[int, ...]], files: str) -> Evidence:
    have = Counter(weights)
    shapes = {pid: tuple(s) if s is not None else None for pid, s in opt["shapes"]}
    want = Counter(s for s in shapes.values() if s is not None)
    misfit = {shape: n - have[shape] for shape, n in want.items() if n > have[shape]}
    params = opt["params"]
    if misfit:
        examples = [f"state {pid}: {list(s)}" for pid, s in shapes.items() if s in misfit]
        described = ", ".join(f"{n} more of shape {list(s)}" for s, n in list(misfit.items())[:3])
        return Evidence(
            "optimizer-covers-model",
            "fail",
            f"{where}: {sum(misfit.values())} optimizer state entr(ies) fit no weight of {files} "
            f"({described} than the model has) — the optimizer state was saved for another model",
            indicates=V.CORRUPT,
            tensors=examples[:_MAX],
        )
    if params > len(weights):
        return Evidence(
            "optimizer-covers-model",
            "fail",
            f"{where}: its param_groups name {params} parameters but {files} hold "
            f"{len(weights)} weights — the optimizer state was saved for another model",
            indicates=V.CORRUPT,
        )
    shaped = sum(want.values())
    unclaimed = sum((have - want).values())
    if not shaped:
        return Evidence(
            "optimizer-covers-model",
            "skip",
            f"{where}: its state is not shaped like parameters (factored, quantized or unknown): not "
            f"paired with the weights of {files}",
        )
    if params == len(weights) and shaped == params:
        return Evidence(
            "optimizer-covers-model",
            "pass",
            f"{where}: one optimizer state entry for every one of the {params} weights of {files}, shapes "
            "matching one to one",
        )
    return Evidence(
        "optimizer-covers-model",
        "note",
        f"{where}: {shaped} state entries fit {shaped} of the {len(weights)} weights of {files} one to one; "
        f"{unclaimed} weight(s) have none (frozen, no gradient yet, or state saved for part of the model)",
    )
