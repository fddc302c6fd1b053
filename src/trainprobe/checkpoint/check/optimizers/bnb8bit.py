"""bitsandbytes 8-bit optimizers (Adam8bit, AdamW8bit, Lion8bit, PagedAdamW8bit...): quantized moments
``state1``/``state2`` (uint8, blockwise) with their ``absmax1``/``absmax2`` scales and ``qmap1``/``qmap2``
code books. The scales are read (finite, >= 0); the moments are codes, so the Adam bound is not checked."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from trainprobe.checkpoint.check.optimizers.base import nonnegative_evidence
from trainprobe.checkpoint.evidence import Evidence

_NESTED = "__bnb_optimizer_quant_state__"


class Bnb8bit:
    name = "bitsandbytes-8bit"
    shaped_like_param = False

    def matches(self, keys: Set[str]) -> bool:
        return bool(keys & {"state1", "absmax1", "qmap1", _NESTED})

    def evidence(self, label: str, state: dict[Any, dict[str, Any]]) -> list[Evidence]:
        # bitsandbytes >= 0.44 keeps its tensors in a nested dict under __bnb_optimizer_quant_state__.
        flat = {
            pid: {**e, **(e[_NESTED] if isinstance(e.get(_NESTED), dict) else {})} for pid, e in state.items()
        }
        keys = {k for entry in flat.values() for k in entry}
        out = [nonnegative_evidence(label, flat, k, "8-bit") for k in ("absmax1", "absmax2") if k in keys]
        out.append(
            Evidence(
                "adam-bound",
                "skip",
                f"{label}: 8-bit (bitsandbytes) moments are quantized codes: the Adam bound is not checked",
            )
        )
        out.append(
            Evidence(
                "moments-vs-counter",
                "skip",
                f"{label}: 8-bit (bitsandbytes) moments are quantized codes: not held against the step "
                "counters",
            )
        )
        return out
