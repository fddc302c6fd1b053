"""``check``, stage one: each part of a unit checked where it is read, into a :class:`PartCheck` (its
evidence, NaN/Inf, fingerprints, notes, identity facts and what ``optimizer-covers-model`` needs): JSON-able,
so a part read on another machine (``check --on FLEET --sharded``) is judged with the others exactly as a
part read here. Stage two, the unit's verdict from its parts' checks, is :mod:`.unit`.

Stdlib + numpy only (shipped to remote hosts)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.check.master import check_master_weights
from trainprobe.checkpoint.check.optimizers import OPTIMIZERS, families_in
from trainprobe.checkpoint.check.optimizers.adam import PairResult, adam_pair, plan_adam
from trainprobe.checkpoint.check.optimizers.adam_report import report_adam
from trainprobe.checkpoint.check.report import nonfinite_entries
from trainprobe.checkpoint.check.state import MAX_NAMES, state_of
from trainprobe.checkpoint.check.structure import check_optimizer
from trainprobe.checkpoint.check.writer_manifest import check_manifest
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.fingerprint import stored_fingerprint
from trainprobe.checkpoint.numerics import NonFinite, count_nonfinite
from trainprobe.checkpoint.reading.base import Checkpoint, Note
from trainprobe.checkpoint.reading.skeleton import find_optimizers
from trainprobe.checkpoint.units.facts import PartFacts
from trainprobe.checkpoint.units.frameworks import Framework, Role, TensorRole
from trainprobe.checkpoint.units.open import part_role
from trainprobe.checkpoint.units.roles import tensor_roles
from trainprobe.errors import CorruptCheckpointError

# What an opened part holds of optimizer state: none (in a part that may hold some), an optimizer without
# per-parameter state, per-parameter state; "" for a part of another role.
NONE, STATELESS, STATEFUL = "none", "stateless", "stateful"


def _note_json(n: Note) -> dict[str, str]:
    return {"kind": n.kind, "message": n.message, "global_name": n.global_name}


def _note(d: dict[str, Any]) -> Note:
    return Note(str(d["kind"]), str(d["message"]), str(d.get("global_name", "")))


@dataclass
class PartCheck:
    """One part as ``check`` saw it (whole, or one share of its data files): ``error`` (it was not opened,
    or opened without some data files) and its verdict; ``coverage`` (DCP chunk coverage: first in its
    evidence, computed by whoever has the ``.metadata`` and the data files' sizes); ``evidence`` (its own
    checks, ``presence`` decided at ``presence_at`` when the unit's step sources are known); ``notes`` (what
    its readers noticed), ``metadata_notes`` (NaN/Inf in metadata); ``nonfinite``, ``fingerprints`` (tensor
    name, fingerprint), counts, ``facts`` (identity) and ``cover`` (:func:`.cover.cover_facts`)."""

    path: str
    role: Role
    opened: bool = False
    format: str | None = None
    error: str | None = None
    error_verdict: str = V.CORRUPT
    coverage: list[Evidence] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    presence: str = ""
    presence_at: int = 0
    notes: list[Note] = field(default_factory=list)
    metadata_notes: list[Note] = field(default_factory=list)
    nonfinite: list[dict[str, Any]] = field(default_factory=list)
    nonfinite_files: list[str] = field(default_factory=list)  # the data file of each (shares merge by it)
    fingerprints: list[tuple[str, str | None]] = field(default_factory=list)
    tensors: int = 0
    bytes: int = 0
    facts: PartFacts | None = None
    cover: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "role": self.role,
            "opened": self.opened,
            "format": self.format,
            "error": self.error,
            "error_verdict": self.error_verdict,
            "coverage": [e.to_json() for e in self.coverage],
            "evidence": [e.to_json() for e in self.evidence],
            "presence": self.presence,
            "presence_at": self.presence_at,
            "notes": [_note_json(n) for n in self.notes],
            "metadata_notes": [_note_json(n) for n in self.metadata_notes],
            "nonfinite": self.nonfinite,
            "nonfinite_files": self.nonfinite_files,
            "fingerprints": [list(f) for f in self.fingerprints],
            "tensors": self.tensors,
            "bytes": self.bytes,
            "facts": self.facts.to_json() if self.facts is not None else None,
            "cover": self.cover,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PartCheck:
        return cls(
            d["path"],
            d["role"],
            bool(d["opened"]),
            d.get("format"),
            d.get("error"),
            d.get("error_verdict", V.CORRUPT),
            [Evidence.from_json(e) for e in d.get("coverage", [])],
            [Evidence.from_json(e) for e in d.get("evidence", [])],
            d.get("presence", ""),
            int(d.get("presence_at", 0)),
            [_note(n) for n in d.get("notes", [])],
            [_note(n) for n in d.get("metadata_notes", [])],
            list(d.get("nonfinite", [])),
            [str(f) for f in d.get("nonfinite_files", [])],
            [(str(n), fp) for n, fp in d.get("fingerprints", [])],
            int(d.get("tensors", 0)),
            int(d.get("bytes", 0)),
            PartFacts.from_json(d["facts"]) if d.get("facts") else None,
            d.get("cover"),
        )


def check_part(ckpt: Checkpoint, pc: PartCheck, framework: Framework, pool: Executor) -> None:
    """Every check of one opened part into ``pc`` (its coverage is the caller's: it needs the directory)."""
    from trainprobe.checkpoint.check.cover import cover_facts

    role = part_role(pc.role)
    pc.opened, pc.format = True, ckpt.format
    pc.facts = PartFacts.of(pc.path, role, ckpt, framework)
    pc.cover = cover_facts(pc.path, role, ckpt)
    if ckpt.format == "hf-sharded":
        pc.evidence.append(Evidence("hf-index", "pass", "every shard and tensor the index lists is present"))
    try:
        _check_with(ckpt, role, framework, pc, pool)
    except CorruptCheckpointError as exc:
        pc.evidence.append(Evidence("container", "fail", exc.reason, indicates=V.CORRUPT))


def _adam_only(state: dict[Any, dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """The entries of the Adam family (Adafactor keeps an exp_avg_sq for vectors too: not an Adam pair)."""
    adam = set(families_in(state).get("adam", []))
    return {pid: entry for pid, entry in state.items() if pid in adam}


def _check_with(ckpt: Checkpoint, role: Role, framework: Framework, pc: PartCheck, pool: Executor) -> None:
    ev = pc.evidence
    pc.tensors = len(ckpt.records)
    pc.bytes = sum(r.nbytes for r in ckpt.records)
    # numpy and the CRC32 functions release the GIL on large buffers, so CRCs, NaN counts and Adam checks
    # overlap: verify() is submitted first and checks its records on threads of its own.
    verified = pool.submit(ckpt.verify)
    optimizers = [(label, opt, *state_of(opt)) for label, opt in find_optimizers(ckpt.objects)]
    # Each (m, v) pair is read once: the Adam pass also counts both tensors' NaN/Inf.
    plans = [plan_adam(label, _adam_only(state), owner) for label, _opt, state, owner, _cov in optimizers]
    fused: dict[int, tuple[Future[PairResult], int]] = {}
    for plan in plans:
        for job in plan.jobs:
            future = pool.submit(adam_pair, *job)
            plan.results.append(future)
            fused.setdefault(id(job[1]), (future, 0))
            fused.setdefault(id(job[2]), (future, 1))
    counts = [
        None if id(rec) in fused else pool.submit(count_nonfinite, rec, fingerprint=True)
        for rec in ckpt.records
    ]
    check_manifest(ckpt, ev)
    optimizer_ev: list[Evidence] = []
    for (label, opt, state, owner, coverage), plan in zip(optimizers, plans, strict=True):
        check_optimizer(label, opt, state, owner, coverage, ckpt, optimizer_ev)
        report_adam(plan, optimizer_ev)
        optimizer_ev.extend(_family_evidence(label, state))
    ev.append(integrity_evidence(verified.result()))
    found: list[NonFinite] = []
    for rec, count in zip(ckpt.records, counts, strict=True):
        if count is not None:
            found.append(count.result())
        else:  # an Adam pair's tensor: fingerprinted by its container's CRC32, when it stores one
            pair, which = fused[id(rec)]
            done = pair.result()
            found.append(done.m_nonfinite if which == 0 else done.v_nonfinite)
    counted = _record_tensors(pc, ckpt, tensor_roles(ckpt, part_role(role), framework), found)
    if counted:
        ev.append(nonfinite_evidence(counted))
    ev.extend(optimizer_ev)
    # Whether a missing step field leaves a tear unseen depends on the whole unit's step sources: decided
    # when the unit is judged (:func:`presence_evidence`), here only where it goes.
    pc.presence_at = len(ev)
    if optimizers:
        pc.presence = STATEFUL if any(state for _l, _o, state, _w, _c in optimizers) else STATELESS
    else:
        pc.presence = NONE if role in ("optimizer", "state") else ""
    check_master_weights(ckpt.records, ev)


def _family_evidence(label: str, state: dict[Any, dict[str, Any]]) -> list[Evidence]:
    """What each optimizer family among ``state``'s entries says of them (a family trainprobe does not
    know: a skip that names its keys)."""
    out: list[Evidence] = []
    by_name = {f.name: f for f in OPTIMIZERS}
    for name, pids in families_in(state).items():
        if name == "unknown":
            out.append(
                Evidence(
                    "optimizer-family",
                    "skip",
                    f"{label}: {len(pids)} state entr(ies) of an optimizer trainprobe does not know "
                    f"(keys {sorted({str(k) for p in pids for k in state[p]})[:6]}): not checked",
                )
            )
        else:
            out.extend(by_name[name].evidence(label, {p: state[p] for p in pids}))
    return out


def _record_tensors(
    pc: PartCheck, ckpt: Checkpoint, roles: Sequence[TensorRole], found: list[NonFinite]
) -> list[dict[str, Any]]:
    """Each tensor's fingerprint and NaN/Inf into ``pc`` (in metadata: a note); the non-finite entries that
    count (weights and optimizer state)."""
    for rec, bad, tensor_role in zip(ckpt.records, found, roles, strict=True):
        if tensor_role != "metadata":
            fp = bad.fingerprint if bad.fingerprint is not None else stored_fingerprint(rec)
            pc.fingerprints.append((rec.name, fp))
    entries = nonfinite_entries(ckpt.records, found, list(roles))
    counted = [e for e in entries if e["role"] != "metadata"]
    for e in entries:
        if e["role"] == "metadata":
            pc.metadata_notes.append(
                Note(
                    "metadata-nonfinite",
                    f"{e['name']} holds NaN/Inf: metadata, not weights or optimizer state",
                )
            )
    pc.nonfinite.extend(counted)
    pc.nonfinite_files.extend(
        os.path.basename(rec.file)
        for rec, bad, tensor_role in zip(ckpt.records, found, roles, strict=True)
        if bad.total and tensor_role != "metadata"
    )
    return counted


def integrity_evidence(problems: list[str], count: int | None = None) -> Evidence:
    """The ``container`` evidence of a part's zip CRC32s and record sizes (``count``: how many problems in
    all, when ``problems`` is the first of them)."""
    if not problems:
        return Evidence("container", "pass", "zip CRC32s and record sizes match (where the format has them)")
    count = len(problems) if count is None else count
    return Evidence(
        "container",
        "fail",
        f"{count} integrity problem(s): {problems[0]}",
        indicates=V.CORRUPT,
        values={"problems": problems[:50], "count": count},
    )


def nonfinite_evidence(counted: list[dict[str, Any]]) -> Evidence:
    """The ``non-finite`` evidence of the weights and optimizer state that hold NaN/Inf (one entry each)."""
    first = counted[0]
    return Evidence(
        "non-finite",
        "fail",
        f"{len(counted)} tensor(s) hold NaN/Inf, e.g. {first['name']} "
        f"({first['nan']} NaN, {first['posinf']} +Inf, {first['neginf']} -Inf)",
        indicates=V.NONFINITE,
        tensors=[n["name"] for n in counted[:MAX_NAMES]],
    )


def presence_evidence(presence: str, stated: bool, with_weights: bool = False) -> list[Evidence]:
    """What an opened part's optimizer state (``presence``) leaves unchecked, given whether the unit states
    its step (``stated``) and holds model weights beside it (``with_weights``: then, with no step stated, a
    tear between model and optimizer would not show, so the unit is unknown, never consistent)."""
    if presence == NONE:
        return [Evidence("optimizer-state", "skip", "no optimizer state in this file")]
    if presence == STATELESS:
        return [
            Evidence(
                "optimizer-state",
                "skip",
                "the optimizer keeps no per-parameter state (plain SGD, or no step taken yet): one file "
                "cannot show a tear",
            )
        ]
    if presence == STATEFUL and not stated and with_weights:
        return [
            Evidence(
                "model-vs-optimizer",
                "skip",
                "no step recorded beside the weights: a tear between model weights and optimizer state "
                "would not show in this unit (diff two consecutive checkpoints to see it)",
                values={"ambiguous": True},
            )
        ]
    if presence == STATEFUL and not stated:
        return [
            Evidence(
                "model-vs-optimizer",
                "skip",
                "no step field: a split exactly between model weights and optimizer state would not show "
                "in one file (diff two consecutive checkpoints to see it)",
            )
        ]
    return []
