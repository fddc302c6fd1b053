"""Lion: one momentum, ``exp_avg``, per parameter (no second moment, usually no step counter)."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from trainprobe.checkpoint.evidence import Evidence


class Lion:
    name = "lion"
    shaped_like_param = True

    def matches(self, keys: Set[str]) -> bool:
        return keys - {"step"} == {"exp_avg"}

    def evidence(self, label: str, state: dict[Any, dict[str, Any]]) -> list[Evidence]:
        return [
            Evidence(
                "optimizer-steps",
                "skip",
                f"{label}: Lion keeps one moment (exp_avg), no second moment and no step counter: the Adam "
                "relations do not apply and one file cannot show whether it mixes steps",
            )
        ]
