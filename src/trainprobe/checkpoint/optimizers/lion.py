"""Lion: one momentum, ``exp_avg``, per parameter (no second moment, usually no step counter)."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from trainprobe.checkpoint.check.report import Evidence


class Lion:
    name = "lion"
    shaped_like_param = True

    def matches(self, keys: Set[str]) -> bool:
        return "exp_avg" in keys and not keys & {"exp_avg_sq", "exp_avg_sq_row", "RMS", "state1"}

    def evidence(self, label: str, state: dict[Any, dict[str, Any]]) -> list[Evidence]:
        return [
            Evidence(
                "adam-bound",
                "skip",
                f"{label}: Lion keeps one moment (exp_avg) and no second: the Adam relations do not apply",
            )
        ]
