"""Optimizer families behind one small Protocol: which state keys mark a family, which checks hold for it.

A family (one module each in ``check.optimizers``) recognises a parameter's state by its keys
and adds the evidence that holds for it; checks that cannot run for it are shown as ``skip`` with the reason.
An optimizer no family recognises is ``unknown``, never ``corrupt``: its state is not shape-checked."""

from __future__ import annotations

from collections.abc import Set
from typing import Any, Protocol

import numpy as np

from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.numerics import ChunkReleaser, as_float, blocks
from trainprobe.checkpoint.reading.base import TensorRecord


class OptimizerFamily(Protocol):
    """One family. Register it by a row in ``trainprobe.plugins.OPTIMIZER_FAMILIES``."""

    name: str
    #: whether every non-scalar state tensor has its parameter's shape (false for factored or flat state)
    shaped_like_param: bool

    def matches(self, keys: Set[str]) -> bool:
        """Whether a parameter's state with these keys is this family's."""
        ...

    def evidence(self, label: str, state: dict[Any, dict[str, Any]]) -> list[Evidence]:
        """The family's own checks over its state entries (the Adam pair pass runs apart, threaded)."""
        ...


class WithoutStepCounter:
    """A family whose state keeps no step counter: its one evidence is the skip that says so (``why``), as one
    file cannot show whether such state mixes steps. A family subclasses it and sets ``name``, ``matches``
    and ``why``."""

    name: str
    shaped_like_param = True

    def matches(self, keys: Set[str]) -> bool:
        raise NotImplementedError

    def why(self, label: str, state: dict[Any, dict[str, Any]]) -> str:
        raise NotImplementedError

    def evidence(self, label: str, state: dict[Any, dict[str, Any]]) -> list[Evidence]:
        return [Evidence("optimizer-steps", "skip", self.why(label, state))]


def negative_in(records: list[TensorRecord]) -> list[str]:
    """The names of tensors holding a value below zero (read chunk by chunk, pages released as they go)."""
    bad = []
    for rec in records:
        arr = rec.array()
        free = ChunkReleaser(rec, arr)
        for start, block in blocks(arr, 1 << 20):
            values = as_float(rec.dtype, block)
            if values.size and bool(np.nanmin(values) < 0) if not np.isnan(values).all() else False:
                bad.append(rec.name)
                break
            free.done(start, block.size)
        free.flush()
    return bad


def tensors_under(state: dict[Any, dict[str, Any]], key: str) -> list[TensorRecord]:
    out = []
    for entry in state.values():
        value = entry.get(key)
        if isinstance(value, TensorRecord):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, TensorRecord))
    return out


def nonnegative_evidence(label: str, state: dict[Any, dict[str, Any]], key: str, family: str) -> Evidence:
    """``key`` (a running sum or average of squared gradients) is >= 0 everywhere."""
    records = tensors_under(state, key)
    bad = negative_in(records)
    if bad:
        return Evidence(
            f"{key}-nonnegative",
            "fail",
            f"{label}: {key} < 0 in {len(bad)} tensor(s), e.g. {bad[0]} — {family} keeps squares, which "
            "cannot be negative",
            indicates="corrupt",
            tensors=bad[:8],
        )
    return Evidence(
        f"{key}-nonnegative", "pass", f"{label}: {family} {key} >= 0 in all {len(records)} tensors"
    )
