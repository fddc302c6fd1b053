"""``check``: is each unit one consistent snapshot? The entry points.

Every part of a unit is opened and checked where it is (:func:`.part.check_part`: the optimizer families'
evidence, NaN/Inf, containers, the manifest, master weights); then the unit is judged from its parts'
checks (:func:`.unit.judge_check`: what its pickles name, files no reader claims, whether its step sources
agree, whether the optimizer covers the model). The verdict is the worst evidence (:func:`.report.decide`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.check.containers import dcp_coverage_problems
from trainprobe.checkpoint.check.cross import cross_unit_evidence
from trainprobe.checkpoint.check.part import PartCheck, check_part
from trainprobe.checkpoint.check.report import CheckReport, CheckResult
from trainprobe.checkpoint.check.unit import judge_check
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.fingerprint import mark_identical
from trainprobe.checkpoint.reading.base import Checkpoint
from trainprobe.checkpoint.units.discover import Unit, discover_units
from trainprobe.checkpoint.units.frameworks import framework_named
from trainprobe.checkpoint.units.open import framework_of, open_part
from trainprobe.errors import UsageError

_WORKERS = min(8, (os.cpu_count() or 2) + 2)


def check_paths(paths: Sequence[str]) -> CheckReport:
    """Check every unit among ``paths``: files, directories (searched recursively for units: a
    CheckpointWriter directory means all its checkpoints, ``checkpoint-N/`` one), and quoted globs."""
    if not paths:
        raise UsageError("nothing to check: give at least one checkpoint file, directory or glob")
    return check_units(discover_units(list(paths)))


def check_units(units: Sequence[Unit]) -> CheckReport:
    """Check each of ``units``, then the evidence between them (copies, an earlier unit's moments under a
    later step): what ``check`` gives for them, and ``diff`` for its two sides."""
    results = [check_unit(u) for u in units]
    mark_identical(results)
    cross_unit_evidence(results)
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


def check_unit(unit: Unit) -> CheckResult:
    """The verdict on one unit. Never raises for a bad file: unreadable and corrupt are verdicts too."""
    if unit.problem is not None:
        return judge_check(unit, [])
    checks: list[PartCheck] = []
    opened: list[tuple[Checkpoint, PartCheck]] = []
    try:
        for part in unit.parts:
            ckpt, error, error_verdict, notes = open_part(part.path)
            pc = PartCheck(part.path, part.role, error=error, error_verdict=error_verdict, notes=notes)
            pc.coverage = dcp_evidence(part.path)
            checks.append(pc)
            if ckpt is not None:
                pc.notes.extend(ckpt.notes)
                opened.append((ckpt, pc))
        framework = framework_of(unit.framework, opened[0][0]) if opened else framework_named(unit.framework)
        with ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="trainprobe-check") as pool:
            for ckpt, pc in opened:
                check_part(ckpt, pc, framework, pool)
    finally:
        for ckpt, _pc in opened:
            ckpt.close()
    return judge_check(unit, checks)


def dcp_evidence(
    path: str, *, metadata: bytes | None = None, sizes: Mapping[str, int] | None = None
) -> list[Evidence]:
    """DCP chunk coverage of ``path`` (nothing when it is no DCP directory); ``metadata`` and ``sizes``:
    the ``.metadata`` bytes and the data files' sizes, when the directory is not here."""
    ev: list[Evidence] = []
    dcp = dcp_coverage_problems(path, metadata=metadata, sizes=sizes)
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
