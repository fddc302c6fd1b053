"""``check``, stage two: a unit's verdict from its parts' checks (:class:`~.part.PartCheck`), wherever each
part was read. Pure: no file is read here (but a unit's ``trainer_state.json`` when it is on this machine and
``trainer_state`` is not given). The one place ``check`` assembles a unit's result, for ``check PATH`` and
for ``check --on FLEET --sharded PATH`` alike."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.check.cover import cover_from_facts
from trainprobe.checkpoint.check.part import PartCheck, presence_evidence
from trainprobe.checkpoint.check.report import CheckResult, decide
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.fingerprint import tensor_key, unit_fingerprint
from trainprobe.checkpoint.reading.pickle.unpickler import SUSPICIOUS
from trainprobe.checkpoint.scanning.judge import unit_evidence, unit_framework
from trainprobe.checkpoint.units.discover import Unit
from trainprobe.checkpoint.units.steps import chosen_step, collect_step_sources, saved_step

# An optimizer's tensors by their names (a bare optimizer file's ``state.0.exp_avg``, a training dict's
# ``optimizer.state...``, Lightning's ``optimizer_states.0...``): what is not one of them is a model's.
_OPTIMIZER_TENSOR = re.compile(
    r"(?:^|\.)(?:optimizer|optimizer_states|optim|opt)(?:\.|$)|(?:^|\.)state\.\d+\."
)


def holds_weights(opened: Sequence[PartCheck]) -> bool:
    """Whether a unit's opened parts hold model weights (a weights part, or tensors no optimizer's)."""
    return any(
        pc.role == "weights" or any(not _OPTIMIZER_TENSOR.search(name) for name, _fp in pc.fingerprints)
        for pc in opened
    )


def _rel(path: str, unit_path: str) -> str:
    return "" if path == unit_path else os.path.relpath(path, unit_path)


def pickle_evidence(result: CheckResult) -> None:
    """The globals ``torch.load`` would run, first in the unit's evidence."""
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


def add_part(result: CheckResult, pc: PartCheck, rel: str, stated: bool, with_weights: bool) -> None:
    """An opened part's evidence (tagged with its name ``rel``), counts, NaN/Inf and fingerprints."""
    at = pc.presence_at
    presence = presence_evidence(pc.presence, stated, with_weights)
    ev = [*pc.coverage, *pc.evidence[:at], *presence, *pc.evidence[at:]]
    for e in ev:
        e.file = rel
    result.evidence.extend(ev)
    result.files.append(
        {"path": pc.path, "role": pc.role, "format": pc.format, "tensors": pc.tensors, "bytes": pc.bytes}
    )
    result.tensors += pc.tensors
    result.bytes += pc.bytes
    result.nonfinite.extend(pc.nonfinite)
    result.notes.extend(pc.metadata_notes)
    result.tensor_fingerprints.extend((pc.path, name, fp) for name, fp in pc.fingerprints)


def judge_check(
    unit: Unit,
    checks: Sequence[PartCheck],
    *,
    trainer_state: int | None = None,
    is_file: bool | None = None,
    evidence: Sequence[Evidence] = (),
) -> CheckResult:
    """The verdict on ``unit`` from its parts' checks (in its parts' order). ``trainer_state`` and
    ``is_file``: as :func:`~trainprobe.checkpoint.units.steps.collect_step_sources` (given for a unit whose
    files are on other machines); ``evidence``: more of the unit's own (a file two targets hold in different
    versions)."""
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
                file=_rel(path, unit.path),
            )
        )
    for pc in checks:
        rel = _rel(pc.path, unit.path)
        result.notes.extend(pc.notes)
        if not pc.opened:
            for e in pc.coverage:
                e.file = rel
                ev.append(e)
        if pc.error is not None:  # not read at all, or read without its missing data files
            ev.append(Evidence("container", "fail", pc.error, indicates=pc.error_verdict, file=rel))
        if not pc.opened:
            result.files.append({"path": pc.path, "role": pc.role, "format": None, "error": pc.error})
        else:
            result.format = result.format or pc.format
    opened = [pc for pc in checks if pc.opened]
    facts = [pc.facts for pc in opened if pc.facts is not None]
    framework = unit_framework(unit, facts)
    alone = unit.framework == "file"
    if alone:
        unit.framework = result.framework = framework.name
    sources = collect_step_sources(unit.path, framework, facts, trainer_state=trainer_state, is_file=is_file)
    result.step, result.step_source = chosen_step(sources)
    result.step_sources = [s.to_json() for s in sources]
    stated = saved_step(sources) is not None
    weights = holds_weights(opened)
    for pc in opened:
        add_part(result, pc, _rel(pc.path, unit.path), stated, weights)
    ev.extend(cover_from_facts([pc.cover for pc in opened if pc.cover is not None], framework))
    pickle_evidence(result)
    ev.extend(unit_evidence(unit, framework, facts, sources, alone=alone, here=is_file is None))
    ev.extend(evidence)
    result.tensor_prints = {
        tensor_key(unit.path, path, name): fp for path, name, fp in result.tensor_fingerprints
    }
    result.fingerprint = unit_fingerprint(result.tensor_prints.items())
    result.tensor_fingerprints = []
    return decide(result)
