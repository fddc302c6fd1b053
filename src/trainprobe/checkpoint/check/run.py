"""``check``: is each unit one consistent snapshot? The entry points, and the evidence gathered per unit.

Every part of a unit is opened and checked (the optimizer families' evidence, NaN/Inf, containers, the
manifest, master weights); then the unit's own evidence: what its pickles name, files no reader claims,
and whether its step sources agree. The verdict is the worst evidence (:func:`.report.decide`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.base import Checkpoint, Note
from trainprobe.checkpoint.check.containers import dcp_coverage_problems
from trainprobe.checkpoint.check.cover import cover_evidence
from trainprobe.checkpoint.check.master import check_master_weights
from trainprobe.checkpoint.check.report import (
    CheckReport,
    CheckResult,
    Evidence,
    decide,
    nonfinite_entries,
)
from trainprobe.checkpoint.check.state import MAX_NAMES, find_optimizers, state_of
from trainprobe.checkpoint.check.structure import check_optimizer
from trainprobe.checkpoint.check.writer_manifest import check_manifest
from trainprobe.checkpoint.fingerprint import mark_identical, stored_fingerprint, tensor_key, unit_fingerprint
from trainprobe.checkpoint.frameworks import Framework, Part, framework_named
from trainprobe.checkpoint.frameworks.base import Opened
from trainprobe.checkpoint.identity import PartFacts, chosen_step, collect_step_sources, saved_step
from trainprobe.checkpoint.judge import unit_evidence
from trainprobe.checkpoint.numerics import NonFinite, count_nonfinite
from trainprobe.checkpoint.optimizers import OPTIMIZERS, families_in
from trainprobe.checkpoint.optimizers.adam import PairResult, adam_pair, plan_adam, report_adam
from trainprobe.checkpoint.roles import tensor_roles
from trainprobe.checkpoint.scan import framework_of, open_part, part_role
from trainprobe.checkpoint.units import Unit, discover_units
from trainprobe.checkpoint.unpickler import SUSPICIOUS
from trainprobe.errors import CorruptCheckpointError, UsageError

_WORKERS = min(8, (os.cpu_count() or 2) + 2)


def check_paths(paths: Sequence[str]) -> CheckReport:
    """Check every unit among ``paths``: files, directories (searched recursively for units: a
    CheckpointWriter directory means all its checkpoints, ``checkpoint-N/`` one), and quoted globs."""
    if not paths:
        raise UsageError("nothing to check: give at least one checkpoint file, directory or glob")
    results = [check_unit(u) for u in discover_units(list(paths))]
    mark_identical(results)
    for r in results:
        if r.identical_to:
            r.evidence.append(
                Evidence(
                    "identical",
                    "note",
                    f"its weights and optimizer state are identical to {', '.join(r.identical_to)}: a copy "
                    "of the same state (a backup, or the same step saved again), not another step",
                    values={"identical_to": r.identical_to},
                )
            )
    return CheckReport(results)


def check_paths_json(paths: Sequence[str]) -> dict[str, Any]:
    """``check_paths`` as a JSON-ready dict: what ``check --on TARGET`` runs on the far side."""
    return check_paths(paths).to_json()


def check_path(path: str) -> CheckResult:
    """The verdict on the (first) unit at ``path``. Never raises for a bad file."""
    units = discover_units([path])
    return check_unit(units[0]) if units else CheckResult(path, V.UNREADABLE, "nothing to check")


def check_checkpoint(ckpt: Checkpoint) -> CheckResult:
    """The verdict on an already opened checkpoint (one file, its own unit)."""
    result = CheckResult(ckpt.path, V.UNKNOWN, "", format=ckpt.format)
    framework = framework_of("file", ckpt)
    result.framework = framework.name
    facts = [PartFacts.of(ckpt.path, "state", ckpt, framework)]
    sources = collect_step_sources(ckpt.path, framework, facts)
    result.step, result.step_source = chosen_step(sources)
    result.step_sources = [s.to_json() for s in sources]
    with ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="trainprobe-check") as pool:
        _check_part(ckpt, "state", framework, result, pool, "", saved_step(sources) is not None)
    _pickle_evidence(result)
    unit = Unit(ckpt.path, framework.name, [Part(ckpt.path, "state")])
    result.evidence.extend(unit_evidence(unit, framework, facts, sources))
    return decide(result)


def check_unit(unit: Unit) -> CheckResult:
    """The verdict on one unit. Never raises for a bad file: unreadable and corrupt are verdicts too."""
    result = CheckResult(unit.path, V.UNKNOWN, "", framework=unit.framework, unread=list(unit.unread))
    if unit.problem is not None:
        result.verdict, result.reason = V.UNREADABLE, unit.problem
        return result
    ev = result.evidence
    for path in unit.unread:
        ev.append(
            Evidence(
                "reader",
                "fail",
                f"{os.path.basename(path)} looks like a checkpoint but no reader claims it: not read",
                indicates=V.UNREADABLE,
                file=_rel(path, unit),
            )
        )
    opened: list[Opened] = []
    try:
        for part in unit.parts:
            ckpt, error, error_verdict, notes = open_part(part.path)
            rel = _rel(part.path, unit)
            result.notes.extend(notes)
            if ckpt is None:
                for e in dcp_evidence(part.path):
                    e.file = rel
                    ev.append(e)
            if error is not None:  # not read at all, or read without its missing data files
                ev.append(Evidence("container", "fail", error, indicates=error_verdict, file=rel))
            if ckpt is None:
                result.files.append({"path": part.path, "role": part.role, "format": None, "error": error})
                continue
            opened.append((part.path, part_role(part.role), ckpt))
            result.notes.extend(ckpt.notes)
            result.format = result.format or ckpt.format
        framework = framework_of(unit.framework, opened[0][2]) if opened else framework_named(unit.framework)
        if unit.framework == "file":
            unit.framework = result.framework = framework.name
        facts = [PartFacts.of(path, role, ckpt, framework) for path, role, ckpt in opened]
        sources = collect_step_sources(unit.path, framework, facts)
        result.step, result.step_source = chosen_step(sources)
        result.step_sources = [s.to_json() for s in sources]
        stated = saved_step(sources) is not None
        with ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="trainprobe-check") as pool:
            for path, role, ckpt in opened:
                _check_part(ckpt, role, framework, result, pool, _rel(path, unit), stated)
        ev.extend(cover_evidence(opened, unit.framework))
        _pickle_evidence(result)
        ev.extend(unit_evidence(unit, framework, facts, sources))
        result.fingerprint = unit_fingerprint(
            (tensor_key(unit.path, path, name), fp) for path, name, fp in result.tensor_fingerprints
        )
        result.tensor_fingerprints = []
    finally:
        for _path, _role, ckpt in opened:
            ckpt.close()
    return decide(result)


def _rel(path: str, unit: Unit) -> str:
    return "" if path == unit.path else os.path.relpath(path, unit.path)


def _pickle_evidence(result: CheckResult) -> None:
    suspicious = [n.message for n in result.notes if n.kind == SUSPICIOUS]
    if suspicious:
        result.evidence.insert(
            0,
            Evidence(
                "pickle-globals",
                "fail",
                f"{len(suspicious)} global(s) that torch.load would run: " + "; ".join(suspicious[:3]),
                indicates=V.SUSPICIOUS,
                values={"globals": suspicious},
            ),
        )


def dcp_evidence(path: str) -> list[Evidence]:
    """DCP chunk coverage of ``path`` (nothing when it is no DCP directory)."""
    ev: list[Evidence] = []
    dcp = dcp_coverage_problems(path)
    if dcp is not None:
        problems, n = dcp
        if problems:
            ev.append(
                Evidence(
                    "dcp-coverage",
                    "fail",
                    f"{len(problems)} chunk/file problem(s): {problems[0]}",
                    indicates=V.CORRUPT,
                    values={"problems": problems},
                )
            )
        else:
            ev.append(
                Evidence(
                    "dcp-coverage", "pass", f"the chunks of all {n} tensors tile them; every file present"
                )
            )
    return ev


def _check_part(
    ckpt: Checkpoint,
    role: str,
    framework: Framework,
    result: CheckResult,
    pool: Executor,
    rel: str,
    stated: bool,
) -> None:
    """Every check of one opened part; evidence goes to ``result`` tagged with the part's name ``rel``."""
    ev: list[Evidence] = dcp_evidence(ckpt.path)
    if ckpt.format == "hf-sharded":
        ev.append(Evidence("hf-index", "pass", "every shard and tensor the index lists is present"))
    try:
        _check_with(ckpt, role, framework, result, pool, ev, stated)
    except CorruptCheckpointError as exc:
        ev.append(Evidence("container", "fail", exc.reason, indicates=V.CORRUPT))
    for e in ev:
        e.file = rel
    result.evidence.extend(ev)
    result.files.append(
        {
            "path": ckpt.path,
            "role": role,
            "format": ckpt.format,
            "tensors": len(ckpt.records),
            "bytes": sum(r.nbytes for r in ckpt.records),
        }
    )


def _adam_only(state: dict[Any, dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """The entries of the Adam family (Adafactor keeps an exp_avg_sq for vectors too: not an Adam pair)."""
    adam = set(families_in(state).get("adam", []))
    return {pid: entry for pid, entry in state.items() if pid in adam}


def _check_with(
    ckpt: Checkpoint,
    role: str,
    framework: Framework,
    result: CheckResult,
    pool: Executor,
    ev: list[Evidence],
    stated: bool,
) -> None:
    result.tensors += len(ckpt.records)
    result.bytes += sum(r.nbytes for r in ckpt.records)
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
    by_name = {f.name: f for f in OPTIMIZERS}
    for (label, opt, state, owner, coverage), plan in zip(optimizers, plans, strict=True):
        check_optimizer(label, opt, state, owner, coverage, ckpt, optimizer_ev)
        report_adam(plan, optimizer_ev)
        families = families_in(state)
        for name, pids in families.items():
            if name == "unknown":
                optimizer_ev.append(
                    Evidence(
                        "optimizer-family",
                        "skip",
                        f"{label}: {len(pids)} state entr(ies) of an optimizer trainprobe does not know "
                        f"(keys {sorted({k for p in pids for k in state[p]})[:6]}): not checked",
                    )
                )
            else:
                optimizer_ev.extend(by_name[name].evidence(label, {p: state[p] for p in pids}))
    problems = verified.result()
    if problems:
        ev.append(
            Evidence(
                "container",
                "fail",
                f"{len(problems)} integrity problem(s): {problems[0]}",
                indicates=V.CORRUPT,
                values={"problems": problems[:50]},
            )
        )
    else:
        ev.append(
            Evidence("container", "pass", "zip CRC32s and record sizes match (where the format has them)")
        )
    found: list[NonFinite] = []
    for rec, count in zip(ckpt.records, counts, strict=True):
        if count is not None:
            found.append(count.result())
        else:  # an Adam pair's tensor: fingerprinted by its container's CRC32, when it stores one
            pair, which = fused[id(rec)]
            done = pair.result()
            found.append(done.m_nonfinite if which == 0 else done.v_nonfinite)
    roles = tensor_roles(ckpt, part_role(role), framework)
    for rec, bad, tensor_role in zip(ckpt.records, found, roles, strict=True):
        if tensor_role != "metadata":
            fp = bad.fingerprint if bad.fingerprint is not None else stored_fingerprint(rec)
            result.tensor_fingerprints.append((ckpt.path, rec.name, fp))
    entries = nonfinite_entries(ckpt.records, found, list(roles))
    counted = [e for e in entries if e["role"] != "metadata"]
    for e in entries:
        if e["role"] == "metadata":
            result.notes.append(
                Note(
                    "metadata-nonfinite",
                    f"{e['name']} holds NaN/Inf: metadata, not weights or optimizer state",
                )
            )
    result.nonfinite.extend(counted)
    if counted:
        first = counted[0]
        ev.append(
            Evidence(
                "non-finite",
                "fail",
                f"{len(counted)} tensor(s) hold NaN/Inf, e.g. {first['name']} "
                f"({first['nan']} NaN, {first['posinf']} +Inf, {first['neginf']} -Inf)",
                indicates=V.NONFINITE,
                tensors=[n["name"] for n in counted[:MAX_NAMES]],
            )
        )
    ev.extend(optimizer_ev)
    if not optimizers and role in ("optimizer", "state"):
        ev.append(Evidence("optimizer-state", "skip", "no optimizer state in this file"))
    elif optimizers and not any(state for _l, _o, state, _w, _c in optimizers):
        ev.append(
            Evidence(
                "optimizer-state",
                "skip",
                "the optimizer keeps no per-parameter state (plain SGD, or no step taken yet): one file "
                "cannot show a tear",
            )
        )
    elif optimizers and not stated:
        ev.append(
            Evidence(
                "model-vs-optimizer",
                "skip",
                "no step field: a split exactly between model weights and optimizer state would not show "
                "in one file (diff two consecutive checkpoints to see it)",
            )
        )
    check_master_weights(ckpt.records, ev)
