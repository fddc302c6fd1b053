"""A unit's report from what its parts said when read: the one place scan's verdict of a unit is decided.

Reading (:mod:`.run`) gives a :class:`PartRead` per part — its file report (tensors,
notes, errors) and its :class:`~trainprobe.checkpoint.units.facts.PartFacts` — wherever the part is; a part
read in shares on several machines (a DCP directory spread over node-local disks) gives one per share,
which :func:`merge_reads` makes one. :func:`judge_unit` then decides, from those alone: metadata notes, each
file's verdict, the unit's step sources and the evidence they give (:func:`unit_evidence`, shared with
``check`` and ``diff``), its verdict and fingerprint. Pure: no file is read here but a unit's
``trainer_state.json`` when it is on this machine.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.fingerprint import tensor_key, unit_fingerprint
from trainprobe.checkpoint.reading.base import Note
from trainprobe.checkpoint.scanning.report import FileReport, UnitReport
from trainprobe.checkpoint.units.discover import Unit
from trainprobe.checkpoint.units.facts import PartFacts
from trainprobe.checkpoint.units.frameworks import Framework, framework_named
from trainprobe.checkpoint.units.needs import missing_part_evidence
from trainprobe.checkpoint.units.rates import rate_evidence
from trainprobe.checkpoint.units.sets import missing_descriptor_evidence
from trainprobe.checkpoint.units.sidefiles import side_file_evidence
from trainprobe.checkpoint.units.steps import (
    StepSource,
    chosen_step,
    collect_step_sources,
    has_grad_scaler,
    judge_steps,
    skipped_steps,
)

METADATA_NONFINITE = "metadata-nonfinite"


@dataclass
class PartRead:
    """One part as read (whole, or one share of its data files): its file report, not yet judged, and its
    facts (None when it could not be opened at all)."""

    file: FileReport
    facts: PartFacts | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "file": {**self.file.to_json(), "error_verdict": self.file.error_verdict},
            "facts": self.facts.to_json() if self.facts is not None else None,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PartRead:
        file = FileReport.from_json(d["file"])
        file.error_verdict = d["file"].get("error_verdict", V.UNREADABLE)
        facts = PartFacts.from_json(d["facts"]) if d.get("facts") else None
        return cls(file, facts)


def merge_reads(reads: Sequence[PartRead], *, errors: Sequence[tuple[str, str]] = ()) -> PartRead:
    """The reads of one part's shares as one read of all its files: tensors file by file in file-name order,
    notes once each, errors and problems of every share, facts merged; ``errors``: more (error, verdict)
    pairs (data files no share held or read)."""
    first = reads[0].file
    merged = FileReport(
        first.path, next((r.file.format for r in reads if r.file.format), None), role=first.role
    )
    merged.unit = first.unit
    merged.tensors = sorted(
        (t for r in reads for t in r.file.tensors), key=lambda t: os.path.basename(t.file or "")
    )
    merged.notes = sorted(
        dict.fromkeys(n for r in reads for n in r.file.notes), key=lambda n: (n.kind, n.message)
    )
    merged.problems = [p for r in reads for p in r.file.problems]
    merged.seconds = sum(r.file.seconds for r in reads)
    found = [(r.file.error, r.file.error_verdict) for r in reads if r.file.error is not None] + list(errors)
    if found:
        merged.error = "; ".join(e for e, _v in found)
        merged.error_verdict = V.worst(v for _e, v in found)
    facts: PartFacts | None = None
    for r in reads:
        if r.facts is not None:
            facts = r.facts if facts is None else facts.merge(r.facts)
    return PartRead(merged, facts)


def metadata_notes(report: FileReport) -> None:
    """A non-finite value in metadata (a callback's score, a metric) is a note, not a finding."""
    for t in report.tensors:
        if t.nonfinite and t.role == "metadata":
            counts = ", ".join(
                f"{n} {what}" for n, what in ((t.nan, "NaN"), (t.posinf, "+Inf"), (t.neginf, "-Inf")) if n
            )
            report.notes.append(
                Note(
                    METADATA_NONFINITE, f"{t.name} holds {counts}: metadata (not weights or optimizer state)"
                )
            )


def unit_evidence(
    unit: Unit,
    framework: Framework,
    facts: Sequence[PartFacts],
    sources: Sequence[StepSource],
    *,
    alone: bool | None = None,
    here: bool = True,
) -> list[Evidence]:
    """What a unit says as a whole, the same for ``scan``, ``check`` and ``diff``: whether its step sources
    agree (:func:`trainprobe.checkpoint.units.steps.judge_steps`), whether its scheduler's last learning rate
    is its optimizer's (:func:`trainprobe.checkpoint.units.rates.rate_evidence`) and what its framework knows
    about its parts (a DeepSpeed rank's optimizer partition missing). ``alone``: the unit is one file given
    by itself (default: ``unit.framework == "file"``); what its framework says of the other parts is then a
    note. Files of a set found without the set's descriptor (HF shards without their index, DCP data
    without ``.metadata``: :func:`~trainprobe.checkpoint.units.sets.missing_descriptor_evidence`) are damage.
    ``here``: the unit's files are on this machine, so its JSON files are parsed too
    (:func:`~trainprobe.checkpoint.units.sidefiles.side_file_evidence`) and a DCP data file's folder is looked
    at; a unit spread over other machines' disks is judged without them."""
    scaler = has_grad_scaler([p.path for p in unit.parts], facts)
    out = judge_steps(sources, framework, scaler=scaler, skipped=skipped_steps(facts))
    out.extend(rate_evidence(facts))
    whole = framework.parts_evidence(unit.parts, facts)
    if alone is None:
        alone = unit.framework == "file"
    if alone:
        # One file of a framework's unit, given alone (a DeepSpeed mp_rank_00_model_states.pt): the other
        # parts are not part of what was asked about, so their absence decides nothing.
        folder = os.path.dirname(unit.path) or "."
        whole = [
            replace(
                e,
                outcome="note",
                indicates=None,
                message=f"{e.message} (only this file was given: "
                f"give its folder {folder} to judge the whole checkpoint)",
            )
            if e.failed
            else e
            for e in whole
        ]
    out.extend(whole)
    listed = [p.path for p in unit.listed]
    if not alone:
        out.extend(
            missing_part_evidence(unit.path, unit.parts, [*unit.unread, *listed], framework, here=here)
        )
    out.extend(missing_descriptor_evidence([p.path for p in unit.parts], listed, here=here))
    if here:
        out.extend(side_file_evidence(unit.path, listed))
    return out


def unit_framework(unit: Unit, facts: Sequence[PartFacts]) -> Framework:
    """A unit's framework; a single file's by what its object is (a Lightning .ckpt)."""
    if unit.framework == "file":
        known = next((f.framework for f in facts if f.framework), None)
        if known is not None:
            return framework_named(known)
    return framework_named(unit.framework)


def judge_unit(
    unit: Unit, reads: Sequence[PartRead], *, trainer_state: int | None = None, is_file: bool | None = None
) -> UnitReport:
    """The report of ``unit`` from its parts' reads (in its parts' order). ``trainer_state`` and
    ``is_file``: as :func:`~trainprobe.checkpoint.units.steps.collect_step_sources` (given for a unit whose
    files are on other machines)."""
    report = UnitReport(unit.path, unit.framework, unread=list(unit.unread), problem=unit.problem)
    report.listed = [p.path for p in unit.listed]
    facts = [r.facts for r in reads if r.facts is not None]
    framework = unit_framework(unit, facts)
    report.framework = framework.name if unit.framework == "file" and facts else unit.framework
    for read in reads:
        metadata_notes(read.file)
        read.file.settle_verdict()
        report.files.append(read.file)
    if unit.problem is None:
        report.step_sources = collect_step_sources(
            unit.path, framework, facts, trainer_state=trainer_state, is_file=is_file
        )
        report.step, report.step_source = chosen_step(report.step_sources)
        report.evidence = unit_evidence(unit, framework, facts, report.step_sources, here=is_file is None)
    report.settle_verdict()
    report.fingerprint = unit_fingerprint(
        (tensor_key(unit.path, f.path, t.name), t.fingerprint)
        for f in report.files
        for t in f.tensors
        if t.role != "metadata"
    )
    return report
