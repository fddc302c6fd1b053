"""The one ``check`` report of a unit checked on several machines (``check --on FLEET --sharded PATH``), from
each target's :func:`.share.check_share` result and the plan (:func:`trainprobe.checkpoint.shard_plan.
plan_shards`, with ``whole=True``): each part's checks merged (:func:`.share.merge_part_shares`), DCP chunk
coverage from the ``.metadata`` and the sizes the holders listed, the data files nobody holds and the files
of a target that failed named, and the unit judged by :func:`.unit.judge_check` — the same function as a
check in one place. Pure: nothing is read and nothing runs here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.check.part import PartCheck
from trainprobe.checkpoint.check.report import CheckReport
from trainprobe.checkpoint.check.share import merge_part_shares
from trainprobe.checkpoint.check.unit import judge_check
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.reading.parts import DCP, data_files
from trainprobe.checkpoint.shard_plan import ShardedReport, ShardPlan, part_files

ShardedCheck = ShardedReport[CheckReport]


def merge_check_shards(
    plan: ShardPlan, results: Mapping[str, dict[str, Any]], failed: Mapping[str, str]
) -> ShardedCheck:
    """One check report from each target's :func:`.share.check_share` result (``results``) and the targets
    that failed (``failed``: target -> why)."""
    from trainprobe.checkpoint.check.run import dcp_evidence

    shares_of: dict[str, list[tuple[str, str, PartCheck]]] = {}
    for target, requests in plan.requests.items():
        if target in results:
            for request, check in zip(requests, results[target]["checks"], strict=True):
                first = min(request["files"] or [""])
                shares_of.setdefault(request["part"], []).append((first, target, PartCheck.from_json(check)))
    checks: list[PartCheck] = []
    for part in plan.unit.parts:
        pf = part_files(part, plan.path, plan.holders)
        described = data_files(part.path, description=pf.description) if pf.description is not None else None
        errors: list[tuple[str, str]] = []
        missing = plan.missing.get(part.path, [])
        if missing and described is not None:
            errors.append((described.missing_error(pf.named_in_part(missing)), V.CORRUPT))
        lost = [rel for rel in pf.files if plan.reader.get(rel) in failed]
        if lost:
            who = sorted({plan.reader[rel] for rel in lost})
            why = "; ".join(f"{t}: {failed[t]}" for t in who)
            errors.append(
                (f"not read: {', '.join(pf.named_in_part(lost))} (their target failed: {why})", V.UNREADABLE)
            )
        shares = sorted(shares_of.get(part.path, []), key=lambda s: s[0])
        readers = sorted({t for _f, t, _c in shares})
        split = f"{len(shares)} shares on {', '.join(readers)}" if len(readers) > 1 else ""
        pc = merge_part_shares(part, [c for _f, _t, c in shares], errors, split=split)
        if described is not None and described.kind == DCP:
            named = zip(pf.files, pf.named_in_part(pf.files), strict=True)
            sizes = {name: plan.holders[rel][0].size for rel, name in named if rel in plan.holders}
            pc.coverage = dcp_evidence(part.path, metadata=pf.description, sizes=sizes)
        checks.append(pc)
    conflicts = (
        [Evidence("sharded-conflict", "fail", "; ".join(plan.conflicts), indicates=V.CORRUPT)]
        if plan.conflicts
        else []
    )
    result = judge_check(
        plan.unit, checks, trainer_state=plan.trainer_state, is_file=False, evidence=conflicts
    )
    sharded = ShardedCheck(CheckReport([result]), plan, failed=dict(failed))
    for target in sorted(set(plan.requests) | set(failed) | set(results)):
        sharded.targets.append({
            "target": target,
            "status": "failed" if target in failed else "ok",
            "files": plan.files_of(target),
            "bytes": plan.bytes_of(target),
            "seconds": round(float(results.get(target, {}).get("seconds", 0.0)), 6),
            "error": failed.get(target),
        })  # fmt: skip
    return sharded
