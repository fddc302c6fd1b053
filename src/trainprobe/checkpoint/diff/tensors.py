"""Comparing two tensors, streamed in chunks, NaN/Inf-aware; a tensor saved in chunks (DCP/FSDP2: one per
rank, named ``fqn@offsets``) is compared whole, as the tensor it is, whatever the two tilings.

Per tensor: identical, changed (relative change ||A-B||/||A|| and max |A-B| over the elements finite in both;
NaN/Inf counted, never subtracted), added, removed, shape or dtype changed. Stdlib + numpy only."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainprobe.checkpoint.numerics import as_float, blocks, sum_of_squares
from trainprobe.checkpoint.reading.base import TensorRecord

_CHUNK_ELEMS = 1 << 20
_CHUNK_NAME = re.compile(r"^(.*)@(\d+(?:,\d+)*)$")


@dataclass
class TensorDiff:
    name: str
    status: str  # identical | changed | added | removed | shape-changed | dtype-changed
    dtype: str
    shape: list[int]
    other_dtype: str | None = None
    other_shape: list[int] | None = None
    rel_change: float | None = None
    max_abs_diff: float | None = None
    norm_a: float | None = None
    diff_sq: float = 0.0
    norm_sq: float = 0.0
    param_name: str | None = None
    nonfinite_a: int = 0
    nonfinite_b: int = 0
    chunks: int = 1  # pieces it was saved in (DCP/FSDP2), in A

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "dtype": self.dtype,
            "shape": self.shape,
        }
        if self.param_name:
            out["param_name"] = self.param_name
        if self.chunks > 1:
            out["chunks"] = self.chunks
        if self.other_dtype is not None:
            out["dtype_b"] = self.other_dtype
        if self.other_shape is not None:
            out["shape_b"] = self.other_shape
        if self.status in ("identical", "changed"):
            out["nonfinite_a"] = self.nonfinite_a
            out["nonfinite_b"] = self.nonfinite_b
            out["rel_change"] = json_float(self.rel_change)
            out["max_abs_diff"] = json_float(self.max_abs_diff)
            out["norm_a"] = json_float(self.norm_a)
        return out


def json_float(x: float | None) -> float | str | None:
    """A float as JSON carries it: NaN and infinities as strings (JSON has no such numbers)."""
    if x is None or math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


@dataclass
class LogicalTensor:
    """A tensor as diff compares it: one record, or the chunks a DCP/FSDP2 save split it into (each with its
    offsets into the whole)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    pieces: list[tuple[tuple[int, ...], TensorRecord]] = field(default_factory=list)
    param_name: str | None = None


def logical_tensors(records: list[TensorRecord]) -> list[LogicalTensor]:
    """The records as whole tensors, in the order first seen: chunks ``fqn@o1,o2`` gathered under ``fqn``."""
    out: dict[str, LogicalTensor] = {}
    for rec in records:
        m = _CHUNK_NAME.match(rec.name)
        name, offsets = (m.group(1), tuple(int(o) for o in m.group(2).split(","))) if m else (rec.name, None)
        if offsets is None or len(offsets) != len(rec.shape):
            name, offsets = rec.name, (0,) * len(rec.shape)
        t = out.get(name)
        if t is None:
            t = out[name] = LogicalTensor(name, rec.dtype, rec.shape, [], rec.param_name)
        elif rec.dtype != t.dtype:
            t = out[rec.name] = LogicalTensor(rec.name, rec.dtype, rec.shape, [], rec.param_name)
            offsets = (0,) * len(rec.shape)
        t.pieces.append((offsets, rec))
    for t in out.values():
        if len(t.pieces) > 1:
            t.shape = tuple(max(o[d] + r.shape[d] for o, r in t.pieces) for d in range(len(t.shape)))
    return list(out.values())


def _aligned(
    a: LogicalTensor, b: LogicalTensor
) -> Iterator[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    """Pairs of views of A and B over the same elements: whole records, or where two tilings' chunks meet."""
    if len(a.pieces) == 1 and len(b.pieces) == 1:
        yield a.pieces[0][1].array(), b.pieces[0][1].array()
        return
    by_offset = dict(b.pieces)
    if len(a.pieces) == len(b.pieces) and all(
        o in by_offset and by_offset[o].shape == r.shape for o, r in a.pieces
    ):
        for o, r in a.pieces:
            yield r.array(), by_offset[o].array()
        return
    for oa, ra in a.pieces:
        for ob, rb in b.pieces:
            lo = [max(x, y) for x, y in zip(oa, ob, strict=True)]
            hi = [min(x + n, y + m) for x, n, y, m in zip(oa, ra.shape, ob, rb.shape, strict=True)]
            if all(low < high for low, high in zip(lo, hi, strict=True)):
                yield (
                    ra.array()[
                        tuple(slice(low - x, high - x) for low, high, x in zip(lo, hi, oa, strict=True))
                    ],
                    rb.array()[
                        tuple(slice(low - y, high - y) for low, high, y in zip(lo, hi, ob, strict=True))
                    ],
                )


def diff_tensor(a: LogicalTensor, b: LogicalTensor | None) -> TensorDiff:
    t = TensorDiff(a.name, "removed", a.dtype, list(a.shape), param_name=a.param_name, chunks=len(a.pieces))
    if b is None:
        return t
    if b.shape != a.shape:
        t.status, t.other_shape = "shape-changed", list(b.shape)
        if b.dtype != a.dtype:
            t.other_dtype = b.dtype
        return t
    if b.dtype != a.dtype:
        t.status, t.other_dtype = "dtype-changed", b.dtype
        return t
    info = a.pieces[0][1].dtype_info
    if info is None or info.kind == "opaque":
        t.status = "identical" if all(_equal(x, y) for x, y in _aligned(a, b)) else "changed"
        return t
    identical = True
    diff_sq = norm_sq = 0.0
    max_abs = 0.0
    for whole_a, whole_b in _aligned(a, b):
        for (_s, xa), (_t, xb) in zip(
            blocks(whole_a, _CHUNK_ELEMS), blocks(whole_b, _CHUNK_ELEMS), strict=True
        ):
            fa, fb = as_float(a.dtype, xa).ravel(), as_float(b.dtype, xb).ravel()
            bad_a, bad_b = ~np.isfinite(fa), ~np.isfinite(fb)
            t.nonfinite_a += int(np.count_nonzero(bad_a))
            t.nonfinite_b += int(np.count_nonzero(bad_b))
            both = ~(bad_a | bad_b)  # only where both are finite do numbers compare; NaN/Inf are counted
            with np.errstate(invalid="ignore", over="ignore"):
                norm_sq += sum_of_squares(fa[both])
            if identical and _equal(xa, xb):
                continue
            identical = False
            d = fa[both] - fb[both]
            with np.errstate(invalid="ignore", over="ignore"):
                diff_sq += sum_of_squares(d)
                if d.size:
                    max_abs = max(max_abs, float(np.abs(d).max()))
    t.status = "identical" if identical else "changed"
    t.diff_sq, t.norm_sq = diff_sq, norm_sq
    t.norm_a = math.sqrt(norm_sq) if norm_sq >= 0 else None
    t.max_abs_diff = max_abs
    if identical:
        t.rel_change = 0.0
    elif norm_sq > 0:
        t.rel_change = math.sqrt(diff_sq) / math.sqrt(norm_sq)
    else:
        t.rel_change = math.inf if diff_sq > 0 else 0.0
    return t


def _equal(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> bool:
    if x.dtype.kind in "fc":
        return bool(np.array_equal(x, y, equal_nan=True))
    return bool(np.array_equal(x, y))
