"""SGD with momentum: ``momentum_buffer`` per parameter (``None`` without momentum). It keeps no step counter,
so one file cannot show a tear; its buffers are shaped like their parameters."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from trainprobe.checkpoint.evidence import Evidence


class Sgd:
    name = "sgd"
    shaped_like_param = True

    def matches(self, keys: Set[str]) -> bool:
        return keys <= {"momentum_buffer", "step"} and "momentum_buffer" in keys

    def evidence(self, label: str, state: dict[Any, dict[str, Any]]) -> list[Evidence]:
        return [
            Evidence(
                "optimizer-steps",
                "skip",
                f"{label}: SGD momentum state ({len(state)} buffers) keeps no step counter: one file "
                "cannot show whether it mixes steps (diff two consecutive checkpoints)",
            )
        ]
