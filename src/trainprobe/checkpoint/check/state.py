"""Reading optimizer state and step fields out of a checkpoint's skeleton (no tensor data is read)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import numpy as np

from trainprobe.checkpoint.base import Opaque, TensorRecord
from trainprobe.checkpoint.identity import STEP_FIELDS

MAX_NAMES = 8
T = TypeVar("T")


# -- helpers over the skeleton ---------------------------------------------------------------------


def fields_of(obj: Any) -> Any:
    return obj.fields() if isinstance(obj, Opaque) else obj


def step_field(objects: Any) -> int | None:
    """The checkpoint's own step count: a top-level ``step`` / ``global_step`` integer."""
    objects = fields_of(objects)
    if not isinstance(objects, dict):
        return None
    for key in STEP_FIELDS:
        value = objects.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, TensorRecord) and value.numel == 1:
            number = scalar(value)
            if number is not None and float(number).is_integer():
                return int(number)
    return None


def find_optimizers(obj: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
    obj = fields_of(obj)
    if depth > 6:
        return
    if isinstance(obj, dict):
        if isinstance(obj.get("state"), dict) and isinstance(obj.get("param_groups"), list):
            yield path or "<root>", obj
            return
        for key, value in obj.items():
            yield from find_optimizers(value, f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from find_optimizers(value, f"{path}.{i}" if path else str(i), depth + 1)


def scalar(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, TensorRecord) and value.numel == 1 and value.dtype_info is not None:
        arr = value.array().reshape(1)
        return float(as_float32(value.dtype, arr)[0])
    return None


def as_float32(dtype: str, arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if dtype == "bfloat16":
        out: np.ndarray[Any, Any] = (arr.astype(np.uint32) << 16).view(np.float32)
        return out
    if arr.dtype.kind in "iub":
        return arr.astype(np.float64)
    return arr


def label_of(pid: Any, entry: dict[str, Any]) -> str:
    for value in entry.values():
        if isinstance(value, TensorRecord) and value.param_name:
            return value.param_name
    return f"state[{pid}]"


def group_of(opt: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """param id -> its param_group, and the problems with the groups' coverage of the state."""
    owner: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for gi, group in enumerate(opt["param_groups"]):
        group = fields_of(group)
        if not isinstance(group, dict):
            continue
        params = group.get("params")
        for pid in params if isinstance(params, list) else []:
            if str(pid) in owner:
                problems.append(f"parameter {pid} is in more than one param_group (again in group {gi})")
            owner[str(pid)] = group
    missing = [str(pid) for pid in opt["state"] if str(pid) not in owner]
    if missing:
        problems.append(f"{len(missing)} state entr(ies) belong to no param_group, e.g. {missing[0]}")
    return owner, problems


def state_of(
    opt: dict[str, Any],
) -> tuple[dict[Any, dict[str, Any]], dict[str, dict[str, Any]], list[str]]:
    """An optimizer's per-parameter state entries, each parameter's param_group, and coverage problems."""
    state = {pid: fields_of(entry) for pid, entry in opt["state"].items()}
    state = {pid: entry for pid, entry in state.items() if isinstance(entry, dict)}
    owner, coverage = group_of(opt)
    return state, owner, coverage


def fmt_step(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def suffix_index(items: dict[str, T]) -> dict[str, T | None]:
    """Every dotted suffix of every name (``model.fc.weight``: itself, ``fc.weight``, ``weight``) to its item;
    a suffix shared by two names maps to None (ambiguous). Built once: O(names × depth)."""
    index: dict[str, T | None] = {}
    for name, item in items.items():
        parts = name.split(".")
        for i in range(len(parts)):
            key = ".".join(parts[i:])
            index[key] = item if key not in index or i == 0 else None
    for name, item in items.items():
        index[name] = item  # an exact name always wins
    return index


def param_record(name: str, index: dict[str, TensorRecord | None]) -> TensorRecord | None:
    if name.startswith("state["):
        return None
    return index.get(name)
