"""Reading a checkpoint's skeleton (the object tree a reader returns, tensors as records): the one finder of
optimizer state dicts, and the small values (step counters) in it. No tensor data is read but for one-element
tensors. Imports only numpy and :mod:`trainprobe.checkpoint.reading.base` (the readers use it too)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from trainprobe.checkpoint.reading.base import TensorRecord
from trainprobe.checkpoint.reading.pickle.opaque import Opaque

_MAX_DEPTH = 6


def fields_of(obj: Any) -> Any:
    """An inert placeholder's fields (a dataclass, a Namespace); anything else as it is."""
    return obj.fields() if isinstance(obj, Opaque) else obj


def is_optimizer_state(obj: Any) -> bool:
    """A torch optimizer ``state_dict()``: a ``state`` dict beside a ``param_groups`` list."""
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("state"), dict)
        and isinstance(obj.get("param_groups"), list)
    )


def find_optimizers(obj: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every optimizer state dict in a skeleton, with its dotted path ("<root>" for the skeleton itself)."""
    obj = fields_of(obj)
    if depth > _MAX_DEPTH:
        return
    if is_optimizer_state(obj):
        yield path or "<root>", obj
        return
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from find_optimizers(value, f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from find_optimizers(value, f"{path}.{i}" if path else str(i), depth + 1)


def find_optimizer_states(obj: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, dict[Any, Any]]]:
    """Every optimizer's per-parameter ``state`` dict, with the optimizer's dotted path: as
    :func:`find_optimizers`, but without asking for ``param_groups`` beside it. A part read in shares (a DCP
    rank's file) holds some state entries and maybe none of the groups; what is said about each entry (its
    step counter, its role) must not depend on which share holds the groups."""
    obj = fields_of(obj)
    if depth > _MAX_DEPTH or not isinstance(obj, dict):
        if isinstance(obj, (list, tuple)) and depth <= _MAX_DEPTH:
            for i, value in enumerate(obj):
                yield from find_optimizer_states(value, f"{path}.{i}" if path else str(i), depth + 1)
        return
    state = fields_of(obj.get("state"))
    if isinstance(state, dict) and state and all(isinstance(fields_of(v), dict) for v in state.values()):
        yield path or "<root>", state
        return
    for key, value in obj.items():
        yield from find_optimizer_states(value, f"{path}.{key}" if path else str(key), depth + 1)


def optimizer_prefixes(objects: Any) -> list[str]:
    """The dotted paths of every optimizer's state ("" for the skeleton itself)."""
    return [("" if label == "<root>" else label) for label, _state in find_optimizer_states(objects)]


def as_float32(dtype: str, arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Elements as numbers numpy can compare (bfloat16 from its bits; integers as float64)."""
    if dtype == "bfloat16":
        out: np.ndarray[Any, Any] = (arr.astype(np.uint32) << 16).view(np.float32)
        return out
    if arr.dtype.kind in "iub":
        return arr.astype(np.float64)
    return arr


def scalar(value: Any) -> float | None:
    """A finite number from a plain int/float or a one-element tensor (its element read); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = float(value) if abs(value) < 1 << 63 else math.nan
    elif isinstance(value, float):
        number = value
    elif isinstance(value, TensorRecord) and value.numel == 1 and value.dtype_info is not None:
        arr = value.array().reshape(1)
        number = float(as_float32(value.dtype, arr)[0])
    else:
        return None
    # A NaN, infinite or wider-than-int64 counter is no counter (a NaN in the tensor is counted as such).
    return number if math.isfinite(number) else None


def label_of(pid: Any, entry: dict[str, Any]) -> str:
    """A parameter's name in an optimizer's state: the one its reader found, else ``state[<id>]``."""
    for value in entry.values():
        if isinstance(value, TensorRecord) and value.param_name:
            return value.param_name
    return f"state[{pid}]"
