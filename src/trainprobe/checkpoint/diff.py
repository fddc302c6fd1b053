"""What changed between two checkpoints, tensor by tensor, streamed in chunks (memory stays small).

Per tensor: identical, changed (relative change ||A-B||/||A|| and max |A-B|), added, removed, shape or dtype
changed. A summary per module prefix (the name without its last part). For two checkpoints of one run:
parameters that did not move at all, and parameters whose optimizer step counter moved while the weights
stayed identical (or whose weights moved while the counter did not) — the trace of a save that mixed model and
optimizer from different steps, or of a parameter the optimizer does not actually update.

Imports only the standard library, numpy and trainprobe.checkpoint (shipped to remote hosts).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.base import Checkpoint, Note, TensorRecord
from trainprobe.checkpoint.check.state import find_optimizers, label_of, scalar, suffix_index
from trainprobe.checkpoint.formats import open_file
from trainprobe.checkpoint.numerics import as_float, blocks
from trainprobe.checkpoint.units import discover_units
from trainprobe.checkpoint.unpickler import SUSPICIOUS
from trainprobe.errors import CheckpointError

SCHEMA_VERSION = 2
_LOW_PRECISION = ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")
_CHUNK_ELEMS = 1 << 20
_MAX_LISTED = 50


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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "dtype": self.dtype,
            "shape": self.shape,
        }
        if self.param_name:
            out["param_name"] = self.param_name
        if self.other_dtype is not None:
            out["dtype_b"] = self.other_dtype
        if self.other_shape is not None:
            out["shape_b"] = self.other_shape
        if self.status in ("identical", "changed"):
            out["nonfinite_a"] = self.nonfinite_a
            out["nonfinite_b"] = self.nonfinite_b
            out["rel_change"] = _json_float(self.rel_change)
            out["max_abs_diff"] = _json_float(self.max_abs_diff)
            out["norm_a"] = _json_float(self.norm_a)
        return out


def _json_float(x: float | None) -> float | str | None:
    if x is None or math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


@dataclass
class ModuleDiff:
    prefix: str
    tensors: int = 0
    changed: int = 0
    identical: int = 0
    other: int = 0
    diff_sq: float = 0.0
    norm_sq: float = 0.0

    def to_json(self) -> dict[str, Any]:
        rel = (
            math.sqrt(self.diff_sq / self.norm_sq)
            if self.norm_sq > 0
            else (0.0 if self.diff_sq == 0 else None)
        )
        return {
            "prefix": self.prefix,
            "tensors": self.tensors,
            "changed": self.changed,
            "identical": self.identical,
            "added_removed_or_reshaped": self.other,
            "rel_change": _json_float(rel),
        }


@dataclass
class DiffReport:
    a: str
    b: str
    tensors: list[TensorDiff] = field(default_factory=list)
    steps: tuple[float | None, float | None] = (None, None)
    frozen: list[str] = field(default_factory=list)
    step_without_weights: list[str] = field(default_factory=list)
    weights_without_step: list[str] = field(default_factory=list)
    # Low-precision weights whose optimizer stepped while their stored value did not change: updates below
    # the dtype's resolution, a note (not the trace of a tear).
    below_resolution: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)

    @property
    def suspicious(self) -> list[str]:
        return [n.message for n in self.notes if n.kind == SUSPICIOUS]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.status] = out.get(t.status, 0) + 1
        return out

    def modules(self, depth: int | None = None) -> list[ModuleDiff]:
        """Totals per module prefix: the name without its last part, cut to ``depth`` parts when given."""
        by: dict[str, ModuleDiff] = {}
        for t in self.tensors:
            parts = t.name.split(".")[:-1] or ["<root>"]
            prefix = ".".join(parts if depth is None else parts[:depth])
            m = by.setdefault(prefix, ModuleDiff(prefix))
            m.tensors += 1
            if t.status == "changed":
                m.changed += 1
            elif t.status == "identical":
                m.identical += 1
            else:
                m.other += 1
            m.diff_sq += t.diff_sq
            m.norm_sq += t.norm_sq
        return list(by.values())

    def top_modules(self, most: int = 25) -> list[ModuleDiff]:
        """The finest module summary with at most ``most`` rows (a readable overview of a large model)."""
        best = self.modules(1)
        for depth in range(2, 6):
            finer = self.modules(depth)
            if len(finer) > most:
                break
            best = finer
        return best

    @property
    def verdict(self) -> str:
        """``suspicious`` when a pickle of either names a global that would run code; ``torn`` when the
        optimizer's steps and the weights disagree about what moved; else ``clean``."""
        if self.suspicious:
            return V.SUSPICIOUS
        if self.step_without_weights or self.weights_without_step:
            return V.TORN
        return V.CLEAN

    @property
    def exit_code(self) -> int:
        return V.exit_code([self.verdict])

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "a": self.a,
            "b": self.b,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "notes": [{"kind": n.kind, "message": n.message} for n in self.notes],
            "summary": self.counts(),
            "optimizer_steps": {"a": self.steps[0], "b": self.steps[1]},
            "same_run": {
                "frozen_parameters": self.frozen[:_MAX_LISTED],
                "frozen_count": len(self.frozen),
                "step_moved_weights_did_not": self.step_without_weights[:_MAX_LISTED],
                "weights_moved_step_did_not": self.weights_without_step[:_MAX_LISTED],
                "below_resolution": self.below_resolution[:_MAX_LISTED],
                "below_resolution_count": len(self.below_resolution),
            },
            "modules": [m.to_json() for m in self.modules()],
            "top_modules": [m.to_json() for m in self.top_modules()],
            "tensors": [t.to_json() for t in self.tensors],
        }


def open_unit(path: str) -> Checkpoint:
    """The unit at ``path`` as one checkpoint: a file as it is; a directory unit (``checkpoint-N/``) with
    the records of all its parts, each named ``<file>/<tensor>``. Raises CheckpointError when a part
    cannot be read (its notes kept on the error)."""
    units = discover_units([path])
    unit = units[0] if units else None
    if unit is None or unit.problem is not None:
        raise CheckpointError(path, unit.problem if unit and unit.problem else "no checkpoint here")
    if len(unit.parts) == 1 and unit.parts[0].path == unit.path and not unit.unread:
        return open_file(unit.path)
    if unit.unread:
        raise CheckpointError(path, f"{unit.unread[0]} looks like a checkpoint but no reader claims it")
    merged = Checkpoint(unit.path, unit.framework, {}, [])
    try:
        for part in unit.parts:
            ckpt = open_file(part.path)
            merged._resources.append(ckpt)
            rel = os.path.relpath(part.path, unit.path)
            merged.objects[rel] = ckpt.objects
            merged.notes.extend(ckpt.notes)
            merged.records.extend(dataclasses.replace(r, name=f"{rel}/{r.name}") for r in ckpt.records)
    except BaseException:
        merged.close()
        raise
    return merged


def diff_paths(a: str, b: str) -> DiffReport:
    """Compare unit ``a`` (the reference) with ``b`` (files or directory units of any kind);
    CheckpointError when either cannot be read."""
    with open_unit(a) as ca, open_unit(b) as cb:
        return diff_checkpoints(ca, cb)


def diff_paths_json(a: str, b: str) -> dict[str, Any]:
    return diff_paths(a, b).to_json()


def diff_checkpoints(a: Checkpoint, b: Checkpoint) -> DiffReport:
    report = DiffReport(a.path, b.path, notes=[*a.notes, *b.notes])
    in_b = {r.name: r for r in b.records}
    seen: set[str] = set()
    for ra in a.records:
        if ra.name in seen:
            continue
        seen.add(ra.name)
        rb = in_b.get(ra.name)
        diff = _diff_tensor(ra, rb)
        diff.param_name = ra.param_name
        report.tensors.append(diff)
    for rb in b.records:
        if rb.name not in seen:
            seen.add(rb.name)
            report.tensors.append(TensorDiff(rb.name, "added", rb.dtype, list(rb.shape)))
    _same_run(a, b, report)
    return report


def _diff_tensor(ra: TensorRecord, rb: TensorRecord | None) -> TensorDiff:
    t = TensorDiff(ra.name, "removed", ra.dtype, list(ra.shape))
    if rb is None:
        return t
    if rb.shape != ra.shape:
        t.status, t.other_shape = "shape-changed", list(rb.shape)
        if rb.dtype != ra.dtype:
            t.other_dtype = rb.dtype
        return t
    if rb.dtype != ra.dtype:
        t.status, t.other_dtype = "dtype-changed", rb.dtype
        return t
    info = ra.dtype_info
    if info is None or info.kind == "opaque":
        t.status = "identical" if _same_bytes(ra, rb) else "changed"
        return t
    identical = True
    diff_sq = norm_sq = 0.0
    max_abs = 0.0
    for (_s, xa), (_t, xb) in zip(
        blocks(ra.array(), _CHUNK_ELEMS), blocks(rb.array(), _CHUNK_ELEMS), strict=True
    ):
        fa, fb = as_float(ra.dtype, xa).ravel(), as_float(rb.dtype, xb).ravel()
        bad_a, bad_b = ~np.isfinite(fa), ~np.isfinite(fb)
        t.nonfinite_a += int(np.count_nonzero(bad_a))
        t.nonfinite_b += int(np.count_nonzero(bad_b))
        both = ~(bad_a | bad_b)  # only where both are finite do numbers compare; NaN/Inf are counted
        with np.errstate(invalid="ignore", over="ignore"):
            norm_sq += float(np.dot(fa[both], fa[both]))
        if identical and _equal(xa, xb):
            continue
        identical = False
        d = fa[both] - fb[both]
        with np.errstate(invalid="ignore", over="ignore"):
            diff_sq += float(np.dot(d, d))
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


def _same_bytes(ra: TensorRecord, rb: TensorRecord) -> bool:
    return all(
        _equal(x, y)
        for (_s, x), (_t, y) in zip(
            blocks(ra.array(), _CHUNK_ELEMS), blocks(rb.array(), _CHUNK_ELEMS), strict=True
        )
    )


def _optimizer_steps(ckpt: Checkpoint) -> dict[str, float]:
    """param name -> its step counter, for optimizer state whose parameter the reader could name."""
    out: dict[str, float] = {}
    for _where, opt in find_optimizers(ckpt.objects):
        for pid, entry in opt["state"].items():
            if isinstance(entry, dict) and "step" in entry:
                value = scalar(entry["step"])
                if value is not None:
                    out[label_of(pid, entry)] = value
    return out


def _same_run(a: Checkpoint, b: Checkpoint, report: DiffReport) -> None:
    state_names = {
        r.name for ck in (a, b) for r in ck.records if r.param_name is not None or ".state." in f".{r.name}."
    }
    weights = suffix_index({t.name: t for t in report.tensors if t.name not in state_names})
    params = [
        t
        for t in report.tensors
        if t.name not in state_names and t.status in ("identical", "changed") and _floating(t.dtype)
    ]
    if any(t.status == "changed" for t in params):
        report.frozen = [t.name for t in params if t.status == "identical" and t.shape]
    steps_a, steps_b = _optimizer_steps(a), _optimizer_steps(b)
    if steps_a:
        report.steps = (max(steps_a.values()), max(steps_b.values()) if steps_b else None)
    for pname, sa in steps_a.items():
        sb = steps_b.get(pname)
        if sb is None or pname.startswith("state["):
            continue
        weight = weights.get(pname)
        if weight is None:
            continue
        if sb != sa and weight.status == "identical":
            line = f"{weight.name} (step {sa:g} -> {sb:g}, weights identical)"
            if weight.dtype in _LOW_PRECISION:
                report.below_resolution.append(f"{line}: the updates moved below {weight.dtype}'s resolution")
            else:
                report.step_without_weights.append(line)
        elif sb == sa and weight.status == "changed":
            report.weights_without_step.append(
                f"{weight.name} (step stays {sa:g}, weights changed by {weight.rel_change or 0:.3g})"
            )


def _floating(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat", "complex"))
