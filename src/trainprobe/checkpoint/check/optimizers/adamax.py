"""Adamax: ``exp_avg`` and ``exp_inf`` (an exponentially weighted infinity norm of the gradients, >= 0) and
``step`` per parameter. The Adam bound is for a second moment, not an infinity norm: not checked."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from trainprobe.checkpoint.check.optimizers.base import nonnegative_evidence
from trainprobe.checkpoint.evidence import Evidence


class Adamax:
    name = "adamax"
    shaped_like_param = True

    def matches(self, keys: Set[str]) -> bool:
        return "exp_inf" in keys

    def evidence(self, label: str, state: dict[Any, dict[str, Any]]) -> list[Evidence]:
        return [nonnegative_evidence(label, state, "exp_inf", "Adamax")]
