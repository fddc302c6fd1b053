"""Give optimizer state the name of its parameter (the tensors' own dotted names come from
:mod:`trainprobe.checkpoint.reading.walk`)."""

from __future__ import annotations

from typing import Any

from trainprobe.checkpoint.reading.base import TensorRecord
from trainprobe.checkpoint.reading.skeleton import (
    fields_of,
    find_optimizer_states,
    find_optimizers,
    is_optimizer_state,
)

_MAX_DEPTH = 200


def _join(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _model_candidates(obj: Any, path: str, depth: int, out: list[tuple[str, list[TensorRecord]]]) -> None:
    """Collect dicts whose values are mostly tensors: candidate model state dicts (with their dotted path)."""
    if depth > 6 or not isinstance(obj, dict) or is_optimizer_state(obj):
        return
    tensors = [v for v in obj.values() if isinstance(v, TensorRecord)]
    if tensors and len(tensors) * 2 >= len(obj):
        out.append((path, tensors))
    for k, v in obj.items():
        if isinstance(v, dict):
            _model_candidates(v, _join(path, k), depth + 1, out)


_BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked")


def map_optimizer_params(skeleton: Any, records: list[TensorRecord]) -> tuple[Any, list[TensorRecord]]:
    """Set ``param_name`` on optimizer-state records when exactly one model state dict fits the optimizer.

    torch's optimizer state names parameters by index (``state.12``), in the order of
    ``param_groups[*].params``,
    which is the model's ``parameters()`` order. A model state dict fits when, after dropping known buffers
    and non-floating entries, it has as many tensors as the optimizer has parameters and every state tensor of
    a non-scalar shape has exactly its parameter's shape. Anything less certain leaves the names alone.

    State keyed by parameter name (DCP/FSDP2's ``optimizer.state.<fqn>``) names its parameter itself: each of
    its tensors (each chunk of one saved in chunks) gets that name, whatever else the file holds — so a share
    of a DCP checkpoint names its state as the whole does."""
    renames, named = _by_name(skeleton)
    optimizers = [opt for _label, opt in find_optimizers(skeleton) if id(opt["state"]) not in named]
    candidates: list[tuple[str, list[TensorRecord]]] = []
    if optimizers:
        _model_candidates(skeleton, "", 0, candidates)
    for opt in optimizers:
        mapping = _only_fit(opt, candidates)
        if mapping is None:
            continue
        for pid, entry in opt["state"].items():
            if isinstance(entry, dict):
                for value in entry.values():
                    if isinstance(value, TensorRecord):
                        renames[id(value)] = mapping[str(pid)]
    if not renames:
        return skeleton, records
    import dataclasses

    replaced = {id(r): dataclasses.replace(r, param_name=renames[id(r)]) for r in records if id(r) in renames}
    return _swap(skeleton, replaced, 0), [replaced.get(id(r), r) for r in records]


def _by_name(skeleton: Any) -> tuple[dict[int, str], set[int]]:
    """Record id -> parameter name for optimizer state keyed by parameter name (every tensor of an entry,
    every chunk of one saved in chunks), and the ids of those states."""
    renames: dict[int, str] = {}
    named: set[int] = set()
    for _label, state in find_optimizer_states(skeleton):
        if not all(isinstance(k, str) and not k.isdigit() for k in state):
            continue
        named.add(id(state))
        for pid, entry in state.items():
            for value in fields_of(entry).values() if isinstance(fields_of(entry), dict) else ():
                for rec in value if isinstance(value, list) else [value]:
                    if isinstance(rec, TensorRecord):
                        renames[id(rec)] = pid
    return renames, named


def _only_fit(opt: dict[str, Any], candidates: list[tuple[str, list[TensorRecord]]]) -> dict[str, str] | None:
    """Parameter id -> name, when exactly one model state dict among ``candidates`` fits the optimizer."""
    ids: list[Any] = []
    for group in opt["param_groups"]:
        group = fields_of(group)
        params = group.get("params") if isinstance(group, dict) else None
        if isinstance(params, list):
            ids.extend(params)
    if not ids or len(set(map(str, ids))) != len(ids):
        return None
    fits: list[dict[str, str]] = []
    for path, tensors in candidates:
        params = _parameters(tensors)
        if len(params) != len(ids):
            continue
        by_id = {str(pid): p for pid, p in zip(ids, params, strict=True)}
        if _shapes_fit(opt["state"], by_id):
            cut = len(path) + 1 if path else 0
            fits.append({k: v.name[cut:] for k, v in by_id.items()})
    return fits[0] if len(fits) == 1 else None


def _parameters(tensors: list[TensorRecord]) -> list[TensorRecord]:
    """A state dict's tensors as ``model.parameters()`` yields them: floating, no known buffers, and a tensor
    saved under two names (tied embeddings: one storage, one view) once, under its first name."""
    seen: set[tuple[str, str, int, tuple[int, ...], tuple[int, ...]]] = set()
    out = []
    for t in tensors:
        if t.name.endswith(_BUFFER_SUFFIXES) or t.dtype_info is None or not t.dtype_info.is_floating:
            continue
        view = (t.storage.file, t.storage.key, t.storage_offset, tuple(t.shape), tuple(t.stride))
        if t.storage.key and view in seen:
            continue
        seen.add(view)
        out.append(t)
    return out


def _shapes_fit(state: dict[Any, Any], by_id: dict[str, TensorRecord]) -> bool:
    """Every state entry has its parameter, and every non-scalar state tensor its parameter's shape."""
    for pid, entry in state.items():
        param = by_id.get(str(pid))
        if param is None or not isinstance(entry, dict):
            return False
        for value in entry.values():
            if isinstance(value, TensorRecord) and value.shape and value.shape != param.shape:
                return False
    return True


def _swap(obj: Any, replaced: dict[int, TensorRecord], depth: int) -> Any:
    """The skeleton with each replaced record in place of its old one (containers changed in place)."""
    if isinstance(obj, TensorRecord):
        return replaced.get(id(obj), obj)
    if depth > _MAX_DEPTH:
        return obj
    if isinstance(obj, dict):
        for k in list(obj.keys()):
            obj[k] = _swap(obj[k], replaced, depth + 1)
        return obj
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            obj[i] = _swap(v, replaced, depth + 1)
        return obj
    if isinstance(obj, tuple):
        return tuple(_swap(v, replaced, depth + 1) for v in obj)
    return obj
