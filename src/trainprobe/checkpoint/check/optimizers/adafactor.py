"""Adafactor (torch.optim.Adafactor: ``row_var``/``col_var``; Hugging Face: ``exp_avg_sq_row``/``_col``,
``RMS``, ``exp_avg`` with beta1): the second moment is *factored* for matrices, so its tensors are not shaped
like their parameter (a row and a column vector). The factors are >= 0; the Adam bound does not apply."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from trainprobe.checkpoint.check.optimizers.base import nonnegative_evidence
from trainprobe.checkpoint.evidence import Evidence

_FACTORS = ("row_var", "col_var", "exp_avg_sq_row", "exp_avg_sq_col")


class Adafactor:
    name = "adafactor"
    shaped_like_param = False

    def matches(self, keys: Set[str]) -> bool:
        return bool(keys & set(_FACTORS)) or "RMS" in keys

    def evidence(self, label: str, state: dict[Any, dict[str, Any]]) -> list[Evidence]:
        keys = {k for entry in state.values() for k in entry}
        out = [nonnegative_evidence(label, state, k, "Adafactor") for k in _FACTORS if k in keys]
        out.append(
            Evidence(
                "adam-bound",
                "skip",
                f"{label}: Adafactor factors its second moment: the Adam bound does not apply",
            )
        )
        return out
