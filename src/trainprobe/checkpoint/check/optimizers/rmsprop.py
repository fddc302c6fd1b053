"""RMSprop (and Adadelta): ``square_avg`` (>= 0), optionally ``momentum_buffer``, ``grad_avg`` (centered) or
``acc_delta`` (Adadelta), and ``step``."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from trainprobe.checkpoint.check.optimizers.base import nonnegative_evidence
from trainprobe.checkpoint.evidence import Evidence


class RmsProp:
    name = "rmsprop"
    shaped_like_param = True

    def matches(self, keys: Set[str]) -> bool:
        return "square_avg" in keys

    def evidence(self, label: str, state: dict[Any, dict[str, Any]]) -> list[Evidence]:
        return [nonnegative_evidence(label, state, "square_avg", "RMSprop")]
