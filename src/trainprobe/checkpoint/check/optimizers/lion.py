"""Lion: one momentum, ``exp_avg``, per parameter (no second moment, usually no step counter)."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from trainprobe.checkpoint.check.optimizers.base import WithoutStepCounter


class Lion(WithoutStepCounter):
    name = "lion"

    def matches(self, keys: Set[str]) -> bool:
        return keys - {"step"} == {"exp_avg"}

    def why(self, label: str, state: dict[Any, dict[str, Any]]) -> str:
        return (
            f"{label}: Lion keeps one moment (exp_avg), no second moment and no step counter: the Adam "
            "relations do not apply and one file cannot show whether it mixes steps"
        )
