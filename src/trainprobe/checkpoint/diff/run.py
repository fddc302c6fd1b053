"""What changed between two checkpoint units, tensor by tensor, streamed in chunks (memory stays small).

Per tensor (:mod:`.tensors`): identical, changed (relative change ||A-B||/||A|| and max |A-B|), added,
removed, shape or dtype changed; chunked DCP/FSDP2 tensors compared whole. A summary per module prefix (the
name without its last part). For two checkpoints of one run: parameters that did not move at all, and
parameters whose optimizer step counter moved while the weights stayed identical (or whose weights moved
while the counter did not) — the trace of a save that mixed model and optimizer from different steps, or of a
parameter the optimizer does not actually update.

Each unit is also judged as ``check A B`` judges it (:func:`trainprobe.checkpoint.check.run.check_units`, the
one rule of :mod:`trainprobe.checkpoint.verdict`): the verdict shown for each side is check's, and a finding
in either (a NaN, a suspicious global, a truncated file, a torn unit) makes the diff's verdict and exit code
what check gives that unit; a unit that cannot be opened is reported, never raised.

Imports only the standard library, numpy and trainprobe.checkpoint (shipped to remote hosts).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.check.report import CheckResult
from trainprobe.checkpoint.check.run import check_units
from trainprobe.checkpoint.diff.same_run import same_run, settings_changed
from trainprobe.checkpoint.diff.tensors import TensorDiff, diff_tensor, json_float, logical_tensors
from trainprobe.checkpoint.reading.base import Checkpoint, Note
from trainprobe.checkpoint.reading.formats import open_file
from trainprobe.checkpoint.reading.pickle.unpickler import SUSPICIOUS
from trainprobe.checkpoint.units.discover import Unit, discover_units
from trainprobe.errors import CheckpointError

__all__ = ["DiffReport", "ModuleDiff", "TensorDiff", "diff_checkpoints", "diff_paths", "diff_paths_json"]

SCHEMA_VERSION = 3  # the shared contract of docs/json.md
_MAX_LISTED = 50
_json_float = json_float


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
    # Each unit as check judges it (None when the report was built from two opened checkpoints).
    units: tuple[CheckResult | None, CheckResult | None] = (None, None)
    # Why a unit could not be compared (it could not be opened): side -> the reason.
    not_compared: dict[str, str] = field(default_factory=dict)

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
        """The worst of: each unit's verdict as ``check`` gives it where it is a finding or unreadable
        (non-finite, suspicious, corrupt, torn, unreadable), ``suspicious`` when a pickle of either names a
        global that would run code, ``torn`` when the optimizer's steps and the weights disagree about what
        moved; else ``clean`` (each side's own consistent / unknown is in ``units``)."""
        found = [
            u.verdict
            for u in self.units
            if u is not None and (V.is_finding(u.verdict) or u.verdict == V.UNREADABLE)
        ]
        if self.suspicious:
            found.append(V.SUSPICIOUS)
        if self.step_without_weights or self.weights_without_step:
            found.append(V.TORN)
        return V.worst(found)

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
            "units": {side: _unit_json(u) for side, u in zip("ab", self.units, strict=True) if u is not None},
            "not_compared": dict(self.not_compared),
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


def _unit_json(u: CheckResult) -> dict[str, Any]:
    """A unit as check judged it (its verdict and why, its step, errors, NaN/Inf, failed evidence and
    notes), without timings (two diffs of the same files give the same document)."""
    bad = [
        {"file": u.path, "name": t["name"], "param_name": t.get("param_name"), "nan": t["nan"],
         "posinf": t["posinf"], "neginf": t["neginf"]}
        for t in u.nonfinite
    ]  # fmt: skip
    read = any(f.get("format") for f in u.files)
    return {
        "path": u.path,
        "framework": u.framework,
        "verdict": u.verdict,
        "reason": u.reason,
        "step": u.step,
        "step_source": u.step_source,
        "problem": None if read or u.verdict != V.UNREADABLE else u.reason,
        "errors": [{"file": f["path"], "error": f["error"]} for f in u.files if f.get("error")],
        "unread": list(u.unread),
        "nonfinite": bad,
        "evidence": [e.to_json() for e in u.evidence if e.outcome in ("fail", "note")],
        "identical_to": list(u.identical_to),
    }


def open_unit(path: str | Unit) -> Checkpoint:
    """The unit at ``path`` as one checkpoint: a file as it is; a directory unit (``checkpoint-N/``) with
    the records of all its parts, each named ``<file>/<tensor>``. Raises CheckpointError when a part
    cannot be read (its notes kept on the error)."""
    if isinstance(path, Unit):
        unit: Unit | None = path
    else:
        units = discover_units([path])
        unit = units[0] if units else None
    if unit is None or unit.problem is not None:
        where = path if isinstance(path, str) else path.path
        raise CheckpointError(where, unit.problem if unit and unit.problem else "no checkpoint here")
    if len(unit.parts) == 1 and unit.parts[0].path == unit.path and not unit.unread:
        return open_file(unit.path)
    if unit.unread:
        raise CheckpointError(unit.path, f"{unit.unread[0]} looks like a checkpoint but no reader claims it")
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
    """Compare unit ``a`` (the reference) with ``b`` (files or directory units of any kind). Each unit is
    judged as ``check a b`` judges it; one that cannot be opened (truncated, a part missing) is reported in
    ``not_compared``. Raises CheckpointError only for a path that names no checkpoint at all."""
    ua, ub = (_first_unit(p) for p in (a, b))
    for unit in (ua, ub):
        if unit.problem is not None:
            raise CheckpointError(unit.path, unit.problem)
    judged = check_units([ua, ub])
    units = (judged.results[0], judged.results[1])
    opened: dict[str, Checkpoint] = {}
    problems: dict[str, str] = {}
    try:
        for side, unit in zip("ab", (ua, ub), strict=True):
            try:
                opened[side] = open_unit(unit)
            except CheckpointError as exc:
                problems[side] = exc.reason
        if problems:
            return DiffReport(a, b, units=units, not_compared=problems)
        try:
            report = diff_checkpoints(opened["a"], opened["b"])
        except CheckpointError as exc:  # a tensor beyond comparing: the units' verdicts still stand
            side = "b" if exc.path == opened["b"].path and exc.path != opened["a"].path else "a"
            return DiffReport(a, b, units=units, not_compared={side: exc.reason})
    finally:
        for ckpt in opened.values():
            ckpt.close()
    report.units = units
    return report


def _first_unit(path: str) -> Unit:
    units = discover_units([path])
    return units[0] if units else Unit(path, problem="no checkpoint here")


def diff_paths_json(a: str, b: str) -> dict[str, Any]:
    return diff_paths(a, b).to_json()


def diff_checkpoints(a: Checkpoint, b: Checkpoint) -> DiffReport:
    """Compare two opened checkpoints tensor by tensor (chunked DCP tensors whole)."""
    report = DiffReport(a.path, b.path, notes=list(dict.fromkeys([*a.notes, *b.notes])))
    in_b = {t.name: t for t in logical_tensors(b.records)}
    seen: set[str] = set()
    for ta in logical_tensors(a.records):
        if ta.name in seen:
            continue
        seen.add(ta.name)
        report.tensors.append(diff_tensor(ta, in_b.get(ta.name)))
    for tb in in_b.values():
        if tb.name not in seen:
            seen.add(tb.name)
            report.tensors.append(TensorDiff(tb.name, "added", tb.dtype, list(tb.shape)))
    changed = settings_changed(a, b)
    if changed:
        report.notes.append(
            Note(
                "not-one-run",
                f"the optimizer settings differ ({'; '.join(changed[:4])}): two runs, not two saves of one, "
                "so optimizer steps and weights are not compared",
            )
        )
    else:
        same_run(a, b, report)
    return report
