"""A torn unit is a finding of its own: the save that wrote it raced training (or its parts come from
different steps), at the step of that save. It is joined to the live run's incidents by time — the stall
of the same save and the anomaly after it name this finding, and it names them — but it is never their
cause: a torn file cannot change a live run that did not resume from it.

Confidence (docs/triage.md, "Causes"): **high** when the file itself holds two optimizer steps (check's
per-parameter step counters disagree: only a state that moves while it is written does that); **medium**
for check's other torn evidence (moments outside Adam's bound, weights that are not their master's cast,
files of one save naming different steps), which a save that raced training and a unit put together from
two saves both explain.
"""

from __future__ import annotations

from typing import Any

from trainprobe.conventions import step_json, step_text
from trainprobe.triage.causes import Save, num
from trainprobe.triage.model import SAVE_RACE, SAVE_STALL, CheckpointInfo, Conclusion

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


def torn_finding(
    unit: CheckpointInfo, save: Save | None, events: dict[str, list[dict[str, Any]]]
) -> Conclusion:
    """The finding of one torn unit, at the step of the save that wrote it (else the unit's own step)."""
    step = save.step if save is not None else float(unit.step or 0)
    counters = _counters(unit)
    evidence = [f"check: {unit.relpath} is torn: {unit.reason.split(' — ')[0]}"]
    if save is not None and save.source == "log line":
        evidence.append(f"the log's save at step {step_text(save.step)} wrote it ({save.text[:120]})")
    ahead = [c for c in counters if c > step]
    if ahead:
        evidence.append(
            f"its optimizer step counters reach step {step_text(max(ahead))}, after the save's step "
            f"{step_text(step)}: training went on while the file was written"
        )
    resumes = _resumes_after(events, step)
    evidence.append(
        f"the run resumed at step {step_text(resumes[0])} after this save: if it loaded this file, the live "
        "run carries the tear from there"
        if resumes
        else "the live run did not resume from it (no resume is logged after this save), so the tear is in "
        "the file only"
    )
    if counters:
        level = "high"
        rule = "the file itself holds two optimizer steps (its parameters' step counters disagree)" + (
            ", some past the save's step" if ahead else ""
        )
        title = f"the checkpoint save at step {step_text(step)} raced training: {unit.relpath} is torn"
        alternatives = (
            []
            if ahead
            else [
                "parameters that skip optimizer steps (no gradient on some steps: frozen, unused or sparse "
                "layers) keep older counters"
            ]
        )
    else:
        level = "medium"
        rule = "check finds parts from different steps; a save that raced training and a unit put together "
        rule += "from two saves both explain that"
        title = (
            f"{unit.relpath}, saved at step {step_text(step)}, is torn: its parts come from different steps"
        )
        alternatives = [
            "the unit's parts were written by two saves (a partial overwrite, a copy from two runs)"
        ]
    evidence.append(f"{level} confidence: {rule}")
    evidence += [f"not ruled out: {a}" for a in alternatives]
    return Conclusion(
        SAVE_RACE, title, level, step, [], evidence, _SUGGESTION, checkpoint=unit.path,
        confidence_rule=rule, alternatives=alternatives,
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
    tears = {c.checkpoint: c for c in conclusions if c.cause == SAVE_RACE and c.checkpoint}
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
    return sorted(conclusions, key=lambda c: (c.cause == SAVE_RACE, c.step))
