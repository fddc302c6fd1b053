"""Adagrad: ``sum`` (of squared gradients, >= 0) and ``step`` per parameter."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from trainprobe.checkpoint.check.optimizers.base import nonnegative_evidence
from trainprobe.checkpoint.evidence import Evidence


class Adagrad:
    name = "adagrad"
    shaped_like_param = True

    def matches(self, keys: Set[str]) -> bool:
        return "sum" in keys and not keys & {"exp_avg", "square_avg"}

    def evidence(self, label: str, state: dict[Any, dict[str, Any]]) -> list[Evidence]:
        return [nonnegative_evidence(label, state, "sum", "Adagrad")]
