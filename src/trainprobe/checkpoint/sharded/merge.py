"""One report of a unit read on several machines (``scan`` or ``check --on FLEET --sharded PATH``), from
what each target read and the plan (:func:`.plan.plan_shards`). Pure: nothing is read and nothing runs here.

- :func:`merge_shards`: the shares of each part merge into one read
  (:func:`~trainprobe.checkpoint.scanning.judge.merge_reads`: tensors file by file, notes once each) and the
  unit is judged from its reads exactly as a local scan judges it;
- :func:`merge_check_shards`: each part's checks merged (:func:`.check_share.merge_part_shares`), DCP chunk
  coverage from the ``.metadata`` and the sizes the holders listed, and the unit judged by
  :func:`~trainprobe.checkpoint.check.unit.judge_check` — the same function as a check in one place.

Either way the data files nobody holds and the files of a target that failed are named (:func:`part_errors`),
so the report equals the one of all the files in one place, plus who read which file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.check.part import PartCheck
from trainprobe.checkpoint.check.report import CheckReport
from trainprobe.checkpoint.check.unit import judge_check
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.fingerprint import mark_identical
from trainprobe.checkpoint.reading.parts import DCP, DataFiles, data_files
from trainprobe.checkpoint.scanning.judge import PartRead, judge_unit, merge_reads
from trainprobe.checkpoint.scanning.report import FileReport, ScanReport
from trainprobe.checkpoint.sharded.check_share import merge_part_shares
from trainprobe.checkpoint.sharded.plan import PartFiles, ShardPlan, part_files


class _Report(Protocol):
    @property
    def exit_code(self) -> int: ...
    def to_json(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=_Report)


@dataclass
class ShardedReport(Generic[R]):
    """The one report (a scan's or a check's) of a unit read on several machines, and how: which target read
    which file, the files nobody holds, conflicts, and targets that failed (their files reported as not
    read)."""

    report: R
    plan: ShardPlan
    targets: list[dict[str, Any]] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """The report's (the one rule), and 1 when a target could not run (the fleet rule)."""
        return 1 if self.failed else self.report.exit_code

    def to_json(self) -> dict[str, Any]:
        data = self.report.to_json()
        data["exit_code"] = self.exit_code
        data["sharded"] = {
            "path": self.plan.path,
            "readers": dict(sorted(self.plan.reader.items())),
            "holders": {rel: [h.target for h in hs] for rel, hs in sorted(self.plan.holders.items())},
            "missing": {p: list(fs) for p, fs in self.plan.missing.items()},
            "conflicts": list(self.plan.conflicts),
            "failed": dict(self.failed),
            "targets": self.targets,
        }
        return data

    def add_targets(self, results: Mapping[str, dict[str, Any]]) -> None:
        """One entry per target: what it was given to read, and how it went."""
        plan, failed = self.plan, self.failed
        for target in sorted(set(plan.requests) | set(failed) | set(results)):
            self.targets.append({
                "target": target,
                "status": "failed" if target in failed else "ok",
                "files": plan.files_of(target),
                "bytes": plan.bytes_of(target),
                "seconds": round(float(results.get(target, {}).get("seconds", 0.0)), 6),
                "error": failed.get(target),
            })  # fmt: skip


ShardedScan = ShardedReport[ScanReport]
ShardedCheck = ShardedReport[CheckReport]


def part_errors(
    plan: ShardPlan, part_path: str, pf: PartFiles, described: DataFiles | None, failed: Mapping[str, str]
) -> list[tuple[str, str]]:
    """(message, verdict) for what the merged part lacks: the data files it names that no target holds
    (corrupt) and those of a target that failed (not read: unreadable)."""
    errors: list[tuple[str, str]] = []
    missing = plan.missing.get(part_path, [])
    if missing and described is not None:
        errors.append((described.missing_error(pf.named_in_part(missing)), V.CORRUPT))
    lost = [rel for rel in pf.files if plan.reader.get(rel) in failed]
    if lost:
        who = sorted({plan.reader[rel] for rel in lost})
        why = "; ".join(f"{t}: {failed[t]}" for t in who)
        errors.append(
            (f"not read: {', '.join(pf.named_in_part(lost))} (their target failed: {why})", V.UNREADABLE)
        )
    return errors


def _described(part_path: str, pf: PartFiles) -> DataFiles | None:
    return data_files(part_path, description=pf.description) if pf.description is not None else None


def merge_shards(
    plan: ShardPlan,
    results: Mapping[str, dict[str, Any]],
    failed: Mapping[str, str],
    *,
    stats: bool = False,
    verify: bool = False,
    seconds: float = 0.0,
) -> ShardedScan:
    """One report from each target's :func:`~.scan_share.scan_share` result (``results``) and the targets
    that failed (``failed``: target -> why)."""
    reads_of: dict[str, list[PartRead]] = {}
    for target, requests in plan.requests.items():
        if target in results:
            for request, read in zip(requests, results[target]["reads"], strict=True):
                reads_of.setdefault(request["part"], []).append(PartRead.from_json(read))
    reads: list[PartRead] = []
    for part in plan.unit.parts:
        pf = part_files(part, plan.path, plan.holders)
        described = _described(part.path, pf)
        errors = part_errors(plan, part.path, pf, described, failed)
        shares = reads_of.get(part.path) or [
            PartRead(FileReport(part.path, None, role=part.role, unit=plan.path))
        ]
        reads.append(merge_reads(shares, errors=errors) if described is not None or errors else shares[0])
    unit = judge_unit(plan.unit, reads, trainer_state=plan.trainer_state, is_file=False)
    if plan.conflicts:
        unit.evidence.append(
            Evidence("sharded-conflict", "fail", "; ".join(plan.conflicts), indicates=V.CORRUPT)
        )
        unit.settle_verdict()
    units = [unit]
    mark_identical(units)
    sharded = ShardedScan(ScanReport(units, seconds, stats=stats, verify=verify), plan, failed=dict(failed))
    sharded.add_targets(results)
    return sharded


def merge_check_shards(
    plan: ShardPlan, results: Mapping[str, dict[str, Any]], failed: Mapping[str, str]
) -> ShardedCheck:
    """One check report from each target's :func:`.check_share.check_share` result (``results``) and the
    targets that failed (``failed``: target -> why)."""
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
        described = _described(part.path, pf)
        errors = part_errors(plan, part.path, pf, described, failed)
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
    sharded.add_targets(results)
    return sharded
