"""Optimizer families, one module each, behind :class:`.base.OptimizerFamily`.

To add a family: write a module with a class that has ``name``, ``shaped_like_param``, ``matches`` and
``evidence``, and add its row to :data:`trainprobe.plugins.OPTIMIZER_FAMILIES` (``"module:Class"`` and its
name, which ``check --help`` lists). A parameter's state is the first family's that ``matches`` its keys
(more specific first); none matching: "unknown"."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from trainprobe.checkpoint.check.optimizers.base import OptimizerFamily
from trainprobe.plugins import OPTIMIZER_FAMILIES, instances

OPTIMIZERS: tuple[OptimizerFamily, ...] = instances(__name__, OPTIMIZER_FAMILIES)


def family_of(keys: Set[str]) -> OptimizerFamily | None:
    for family in OPTIMIZERS:
        if family.matches(keys):
            return family
    return None


def families_in(state: dict[Any, dict[str, Any]]) -> dict[str, list[Any]]:
    """Family name ("unknown" when none matches) -> the parameter ids whose state it is."""
    out: dict[str, list[Any]] = {}
    for pid, entry in state.items():
        keys = {k for k, v in entry.items() if v is not None}
        if not keys - {"step"}:
            continue  # no state yet (a parameter that never had a gradient), or SGD without momentum
        family = family_of(keys)
        out.setdefault(family.name if family else "unknown", []).append(pid)
    return out


__all__ = ["OPTIMIZERS", "OptimizerFamily", "families_in", "family_of"]
