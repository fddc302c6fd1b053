"""Reading optimizer state out of a checkpoint's skeleton (no tensor data is read): param_groups, state
entries, names. The finder of optimizer state dicts and the step counters are
:mod:`trainprobe.checkpoint.reading.skeleton`'s."""

from __future__ import annotations

from typing import Any, TypeVar

from trainprobe.checkpoint.reading.base import TensorRecord
from trainprobe.checkpoint.reading.skeleton import fields_of

MAX_NAMES = 8
T = TypeVar("T")
__all__ = ["MAX_NAMES", "group_of", "param_record", "state_of", "suffix_index"]


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
