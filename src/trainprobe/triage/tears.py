"""A torn unit is a finding of its own: the save that wrote it raced training (or its parts come from
different steps), at the step of that save. It is joined to the live run's incidents by time — the stall
of the same save and the anomaly after it name this finding, and it names them — but it is never their
cause: a torn file cannot change a live run that did not resume from it.

Confidence (docs/triage.md, "Causes"): **high** when the file itself holds two optimizer steps (check's
per-parameter step counters disagree: only a state that moves while it is written does that); **medium**
for check's other torn evidence (moments outside Adam's bound, weights that are not their master's cast,
files of one save naming different steps), which a save that raced training and a unit put together from
two saves both explain. Moments that are a fresh optimizer's under later counters (check's
``moments-vs-counter``) are no race: that finding (``optimizer-reset``, high) says the optimizer was
re-initialised and its state saved under the run's counters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainprobe.conventions import step_json, step_text
from trainprobe.triage.causes import Save, num
from trainprobe.triage.model import (
    OPTIMIZER_RESET,
    SAVE_RACE,
    SAVE_STALL,
    UNIT_CAUSES,
    CheckpointInfo,
    Conclusion,
)

#: check's evidence of a fresh optimizer's moments under later counters (checkpoint.check.optimizers)
FRESH_STATE = "moments-vs-counter"

_SUGGESTION = (
    "do not resume from it; save a consistent snapshot without blocking the loop (copy the state, then write "
    "it in the background: trainprobe.save.CheckpointWriter)"
)


def _counters(unit: CheckpointInfo) -> list[float]:
    return sorted(float(s) for s in unit.step_groups)


def _resumes_after(events: dict[str, list[dict[str, Any]]], step: float) -> list[float]:
    return sorted(
        num(e["step"])
        for evs in events.values()
        for e in evs
        if e["kind"] == "resume" and num(e["step"]) >= step
    )


@dataclass(frozen=True)
class _Mechanism:
    cause: str
    title: str
    level: str
    rule: str
    alternatives: list[str]
    suggestion: str


def _mechanism(unit: CheckpointInfo, step: float, ahead: list[float]) -> _Mechanism:
    """What the unit's torn evidence supports: a save that raced training (the counters disagree), a fresh
    optimizer's state under later counters (moments-vs-counter), or parts from different steps (the rest)."""
    at = step_text(step)
    if unit.step_groups:
        rule = "the file itself holds two optimizer steps (its parameters' step counters disagree)" + (
            ", some past the save's step" if ahead else ""
        )
        skipping = (
            "parameters that skip optimizer steps (no gradient on some steps: frozen, unused or sparse "
            "layers) keep older counters"
        )
        title = f"the checkpoint save at step {at} raced training: {unit.relpath} is torn"
        return _Mechanism(SAVE_RACE, title, "high", rule, [] if ahead else [skipping], _SUGGESTION)
    if FRESH_STATE in unit.torn_by:
        counters = step_text(unit.step) if unit.step is not None else "later"
        return _Mechanism(
            OPTIMIZER_RESET,
            f"{unit.relpath}, saved at step {at}, holds a fresh optimizer's state under step counters of "
            f"{counters}: the optimizer was re-initialised, not the run's state saved",
            "high",
            "every Adam moment pair is zero or one step from zero while its counter says more: no run that "
            "took that many optimizer steps on real gradients leaves that",
            ["every gradient of these parameters was exactly zero until the last step (unused until then)"],
            "do not resume from it (Adam would restart its moments under counters that skip the bias "
            "correction: outsized first updates); find where the optimizer is re-created or its state reset "
            "before this save (a resume that restores the step counters but not exp_avg/exp_avg_sq)",
        )
    return _Mechanism(
        SAVE_RACE,
        f"{unit.relpath}, saved at step {at}, is torn: its parts come from different steps",
        "medium",
        "check finds parts from different steps; a save that raced training and a unit put together from "
        "two saves both explain that",
        ["the unit's parts were written by two saves (a partial overwrite, a copy from two runs)"],
        _SUGGESTION,
    )


def torn_finding(
    unit: CheckpointInfo, save: Save | None, events: dict[str, list[dict[str, Any]]]
) -> Conclusion:
    """The finding of one torn unit, at the step of the save that wrote it (else the unit's own step)."""
    step = save.step if save is not None else float(unit.step or 0)
    evidence = [f"check: {unit.relpath} is torn: {unit.reason.split(' — ')[0]}"]
    if save is not None and save.source == "log line":
        evidence.append(f"the log's save at step {step_text(save.step)} wrote it ({save.text[:120]})")
    ahead = [c for c in _counters(unit) if c > step]
    if ahead:
        evidence.append(
            f"its optimizer step counters reach step {step_text(max(ahead))}, after the save's step "
            f"{step_text(step)}: training went on while the file was written"
        )
    m = _mechanism(unit, step, ahead)
    resumes = _resumes_after(events, step)
    if resumes:
        evidence.append(
            f"the run resumed at step {step_text(resumes[0])} after this save: if it loaded this file, the "
            "live run carries the tear from there"
        )
    elif m.cause == OPTIMIZER_RESET:
        # A re-initialised optimizer may be the live run's too, not only what was saved: the file cannot say.
        evidence.append(
            "the live run did not resume from it (no resume is logged after this save); whether the live "
            "optimizer was re-initialised too, or only the state this save wrote, the file cannot tell"
        )
    else:
        evidence.append(
            "the live run did not resume from it (no resume is logged after this save), so the tear is in "
            "the file only"
        )
    evidence.append(f"{m.level} confidence: {m.rule}")
    evidence += [f"not ruled out: {a}" for a in m.alternatives]
    return Conclusion(
        m.cause, m.title, m.level, step, [], evidence, m.suggestion, checkpoint=unit.path,
        confidence_rule=m.rule, alternatives=m.alternatives,
    )  # fmt: skip


def torn_findings(
    saves: list[Save], units: list[CheckpointInfo], events: dict[str, list[dict[str, Any]]]
) -> list[Conclusion]:
    """One finding per torn unit, at the step of the save that wrote it; a unit holding the same tensors as
    one already found (a copy) is named in that finding instead of one of its own."""
    wrote = {s.unit.relpath: s for s in saves if s.unit is not None}
    torn = [u for u in units if u.torn and (u.step is not None or u.relpath in wrote)]
    # the units a save line wrote first, so a copy joins its original's finding
    torn.sort(key=lambda u: u.relpath not in wrote or wrote[u.relpath].source != "log line")
    found: dict[str, Conclusion] = {}
    for u in torn:
        original = next((found[r] for r in u.identical_to if r in found), None)
        if original is None:
            found[u.relpath] = torn_finding(u, wrote.get(u.relpath), events)
            continue
        same = "bytes" if any(r in found for r in u.byte_identical_to) else "tensors"
        at = next(i for i, e in enumerate(original.evidence) if e.endswith(original.confidence_rule))
        original.evidence.insert(at, f"{u.relpath} is a copy of it (the same {same}), torn the same way")
    return list(found.values())


def join_by_time(conclusions: list[Conclusion]) -> list[Conclusion]:
    """The live run's incidents in step order, then the torn units' findings in step order (what the saves
    wrote comes after what happened to the run: a reader, or a summary cut short, meets the causes of the
    anomalies first); each stall's finding and the tear of the same save name each other in ``related`` and
    the evidence."""
    tears = {c.checkpoint: c for c in conclusions if c.cause in UNIT_CAUSES and c.checkpoint}
    for c in conclusions:
        tear = tears.get(c.checkpoint) if c.cause == SAVE_STALL and c.checkpoint else None
        if tear is None:
            continue
        c.related.append({"cause": tear.cause, "step": step_json(tear.step), "title": tear.title})
        tear.related.append({"cause": c.cause, "step": step_json(c.step), "title": c.title})
        at = next(
            (i for i, e in enumerate(tear.evidence) if e.endswith("confidence: " + tear.confidence_rule)),
            len(tear.evidence),
        )
        tear.evidence.insert(
            at,
            f"joined by time, a separate finding: the live run's anomaly at step {step_text(c.step)} "
            "followed this save's stall, not its tear",
        )
    return sorted(conclusions, key=lambda c: (c.cause in UNIT_CAUSES, c.step))
