"""SGD with momentum: ``momentum_buffer`` per parameter (``None`` without momentum). It keeps no step counter,
so one file cannot show a tear; its buffers are shaped like their parameters."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from trainprobe.checkpoint.check.optimizers.base import WithoutStepCounter


class Sgd(WithoutStepCounter):
    name = "sgd"

    def matches(self, keys: Set[str]) -> bool:
        return keys <= {"momentum_buffer", "step"} and "momentum_buffer" in keys

    def why(self, label: str, state: dict[Any, dict[str, Any]]) -> str:
        return (
            f"{label}: SGD momentum state ({len(state)} buffers) keeps no step counter: one file cannot show "
            "whether it mixes steps (diff two consecutive checkpoints)"
        )
