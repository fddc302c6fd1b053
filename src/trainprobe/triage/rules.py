"""The rules that name what caused an incident of the logs, in the order they are tried (:data:`RULES`; the
first that fits names it), each with the mechanism its evidence supports, its confidence rule and the
alternatives the evidence cannot rule out (docs/triage.md, "Causes"):

- **metric pipeline** (``metric-pipeline``): a cliff in a metric that is not a loss while every loss of the
  run holds steady or keeps falling across it: the model still fits its batches, so what broke is the metric
  or the pipeline that computes it. Medium.
- **save stall** (``save-stall``): a save within ``near`` steps before the incident stalled logging: the save
  blocked the loop, and the anomaly followed the stall. High when the stall is measured, the anomaly begins
  within :data:`~trainprobe.triage.causes.GROUP_STEPS` steps of the save and the same follows at least two of
  the run's stalled saves; medium when measured but once or later; low when the log has no clock to measure
  a stall and the anomaly begins right after the save. What the save *wrote* is never this incident's cause
  (a torn file cannot change a live run that did not resume from it): the tear is its own finding,
  :mod:`trainprobe.triage.tears`, named here only as joined by time.
- **gradient explosion** (``gradient-explosion``): no save within ``near`` steps before it, and the first unit
  at or after it holds NaN/Inf: in optimizer state (high) or only in weights (medium).
- **resume** / **learning-rate change** / an event named with ``--event``: one within ``near`` steps before.
  Medium.
- **unknown**: none of these; low, and the logs' own suggestion stands.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from trainprobe.conventions import step_text
from trainprobe.metrics.findings import CLIFF, Finding, fmt_value
from trainprobe.metrics.roles import metric_kind
from trainprobe.triage.causes import GROUP_STEPS, Case, Scene, leads_into, num, stall_near, unit_line
from trainprobe.triage.model import (
    EVENT_CAUSE,
    EXPLOSION,
    KIND_WORD,
    LR_CAUSE,
    METRIC_PIPELINE,
    RESUME_CAUSE,
    SAVE_STALL,
    UNKNOWN,
    Conclusion,
)

Rule = Callable[[Case], Conclusion | None]

# Rows on each side of a cliff whose median is the loss's level there; a level within this fraction of the
# one before is steady, and one below that the loss still falling (a run still learning while its metric
# broke): only a loss that rose with the cliff says the model changed.
_LEVEL_ROWS = 20
_STEADY = 0.1
_STATE_CHANGED = (
    "the save code changed the training state (left the model in eval mode, reset the data loader or the "
    "RNG, reloaded a state) rather than the time it took"
)


def _level(series: dict[str, Any], step: float, *, before: bool) -> float | None:
    """The median of a metric's last (``before``) or first finite values before / from ``step``."""
    pairs = [
        (float(s), float(v))
        for s, v in zip(series["steps"], series["values"], strict=True)
        if v is not None and not isinstance(s, str)
    ]
    side = [v for s, v in pairs if (s < step if before else s >= step)]
    side = side[-_LEVEL_ROWS:] if before else side[:_LEVEL_ROWS]
    return statistics.median(side) if len(side) >= 5 else None


def metric_pipeline(case: Case) -> Conclusion | None:
    """A cliff in a metric that is not a loss, while every loss of the run holds steady (or keeps falling)
    across it."""
    if any(metric_kind(a.metric) == "loss" for a in case.group):
        return None
    cliff = next((a for a in case.group if a.kind == CLIFF), None)
    if cliff is None:
        return None
    series = ((case.scene.logs or {}).get("series") or {}).get(cliff.run, {})
    levels = []
    for metric, values in series.items():
        if metric_kind(metric) != "loss":
            continue
        before, after = _level(values, cliff.step, before=True), _level(values, cliff.step, before=False)
        if before is None or after is None:
            continue
        if after - before > _STEADY * abs(before):
            return None
        levels.append((metric, before, after))
    if not levels:
        return None
    metric, before, after = levels[0]
    held = "held steady" if before - after <= _STEADY * abs(before) else "kept falling"
    case.evidence.append(
        f"{metric} {held} across it: {fmt_value(before)} before step {step_text(cliff.step)}, "
        f"{fmt_value(after)} after (the median of {_LEVEL_ROWS} rows each side)"
    )
    return case.conclude(
        METRIC_PIPELINE,
        f"{cliff.metric} fell off a cliff at step {step_text(cliff.step)} while {metric} {held} "
        f"({fmt_value(before)} before, {fmt_value(after)} after): the metric or its eval pipeline broke, "
        "not the model",
        (
            "medium",
            "the loss shows the model still fits its training batches; the log cannot tell which "
            "part of the metric's pipeline changed",
        ),
        f"check how {cliff.metric} is computed from step {step_text(cliff.step)} on: its data (the eval set, "
        "the labels), its code (thresholds, argmax axis, label mapping), and whether it reads the model "
        "being trained",
        alternatives=[
            "the eval data changed (a new or shuffled eval set, labels mapped differently)",
            f"the model broke only on what {cliff.metric} measures (held-out data the training loss never "
            "sees)",
        ],
    )


def seconds(x: float) -> str:
    """A stall for people: ``2 s``, ``1.8 s``, ``170 s``."""
    return f"{x:.0f} s" if x >= 10 else f"{x:.2g} s"


def _repeats(case: Case) -> int:
    return len(case.scene.stalled_then_anomaly)


def save_stall(case: Case) -> Conclusion | None:
    """The last save before the group stalled logging (or the log has no clock and the group begins right
    after it): the save blocked the loop and the anomaly followed the stall."""
    if not case.saves_before:
        return None
    save = case.saves_before[-1]
    stall = stall_near(save, case.scene.stalls)
    after = case.step - save.step
    right_after = after <= GROUP_STEPS
    unclocked = not stall and not case.scene.has_clock(case.first.run) and right_after
    if not stall and not unclocked:
        return None
    what = f"the {KIND_WORD.get(case.first.kind, case.first.kind)} in {case.first.metric}"
    case.evidence.append(
        f"{step_text(after)} step(s) after the checkpoint save at step {step_text(save.step)} "
        f"({save.source}: {save.text[:120]})"
    )
    alternatives = [_STATE_CHANGED]
    if stall:
        case.evidence.append(f"that save stalled logging {stall:.1f} s: the loop logged no step meanwhile")
        repeats = _repeats(case)
        if repeats >= 2:
            steps = ", ".join(step_text(s) for s in case.scene.stalled_then_anomaly[:6])
            case.evidence.append(
                f"an anomaly followed {repeats} of the run's {case.scene.stalled} saves that stalled (the "
                f"saves at steps {steps})"
            )
        if right_after and repeats >= 2:
            confidence = (
                "high",
                f"the stall is measured, the anomaly began {step_text(after)} step(s) after the save, and "
                f"the same followed {repeats} stalled saves",
            )
        else:
            weaker = [f"the anomaly began {step_text(after)} steps after the save"] if not right_after else []
            weaker += ["it followed only this save"] if repeats < 2 else []
            confidence = ("medium", "the stall is measured, but " + " and ".join(weaker))
            alternatives.append(f"a hard batch at step {step_text(case.step)} by coincidence")
        title = (
            f"the checkpoint save at step {step_text(save.step)} blocked the loop {seconds(stall)} and "
            f"{what} followed the stall"
        )
    else:
        case.evidence.append("the log has no wall clock: whether the save blocked the loop is not measured")
        confidence = (
            "low",
            "the anomaly began right after the save, but the log has no clock to show a stall",
        )
        alternatives.append(f"a coincidence: something else at step {step_text(case.step)}")
        title = (
            f"{what} began {step_text(after)} step(s) after the checkpoint save at step "
            f"{step_text(save.step)}"
        )
    unit = save.unit
    if unit is not None:
        case.evidence.append(
            f"joined by time, a separate finding: the file this save wrote, {unit_line(unit)}, is torn (a "
            "finding of its own, below); a torn file cannot change a live run that did not resume from it"
            if unit.torn
            else f"the file this save wrote, {unit_line(unit)}, is {unit.verdict}"
        )
    else:
        case.evidence.append(
            f"no checkpoint unit on disk is the one the save at step {step_text(save.step)} wrote"
        )
    return case.conclude(
        SAVE_STALL,
        title,
        confidence,
        "take the save off the training thread (copy the state, then write it in the background: "
        "trainprobe.save.CheckpointWriter blocks only for the copy) or save to faster storage",
        alternatives=alternatives,
        checkpoint=unit.path if unit else None,
    )


def gradient_explosion(case: Case) -> Conclusion | None:
    """No save just before the group, and the first unit at or after it holds NaN/Inf."""
    nxt = case.next_unit
    if case.saves_before or nxt is None or not nxt.has_nonfinite:
        return None
    step = case.step
    opt_bad = nxt.optimizer_nonfinite
    case.evidence.append(
        f"no checkpoint save within {step_text(case.near)} steps before step {step_text(step)}"
    )
    case.evidence.append(
        f"the next checkpoint, {unit_line(nxt)}, holds NaN/Inf "
        + (f"in optimizer state ({len(opt_bad)}+ tensors): " if opt_bad else "in weights: ")
        + nxt.describe_nonfinite()
    )
    prev = [c for c in case.scene.units if c.step is not None and c.step < step]
    if prev:
        last = max(prev, key=lambda c: c.step or 0)
        case.evidence.append(
            f"the checkpoint before it, {last.relpath} (step {step_text(last.step)}), is {last.verdict}"
        )
    climbed = any(leads_into(a, case.group, case.scene.logs) is not None for a in case.group)
    alternatives = (
        ["a learning rate too high for the step, or a shift in the data, that made the loss climb first"]
        if climbed
        else [
            "a corrupt batch (NaN/Inf in its inputs or labels) or a numeric overflow (fp16) at that step: "
            "the log shows no climb before it, which a growing gradient usually does"
        ]
    )
    return case.conclude(
        EXPLOSION,
        f"a gradient explosion at step {step_text(step)} blew up the "
        + ("optimizer state" if opt_bad else "weights"),
        ("high", "the next checkpoint holds NaN/Inf in the optimizer's state: the update wrote them")
        if opt_bad
        else ("medium", "the next checkpoint holds NaN/Inf only in weights, not in the optimizer's state"),
        f"inspect the batch(es) at step {step_text(step)}, clip gradients / skip non-finite steps, and "
        "resume from the last healthy checkpoint",
        alternatives=alternatives,
        checkpoint=nxt.path,
    )


# The events that can explain what follows them, in the order they are tried: (event kind, cause, label).
_EXPLAINING_EVENTS = (
    ("resume", RESUME_CAUSE, "the resume"),
    ("lr_change", LR_CAUSE, "the learning-rate change"),
    ("custom", EVENT_CAUSE, "the logged event"),
)


def preceding_event(case: Case) -> Conclusion | None:
    """A resume, a learning-rate change or an event named with ``--event`` at most ``near`` steps before."""
    step = case.step
    for kind, cause, label in _EXPLAINING_EVENTS:
        evs = [
            e
            for e in case.scene.events.get(case.first.run, [])
            if e["kind"] == kind and num(e["step"]) <= step and step - num(e["step"]) <= case.near
        ]
        if evs:
            at = num(evs[-1]["step"])
            case.evidence.append(
                f"{step_text(step - at)} step(s) after {label} at step {step_text(at)}: {evs[-1]['text']}"
            )
            if kind == "resume":
                _torn_resume_point(case, at)
            return case.conclude(
                cause,
                f"{label} at step {step_text(at)}",
                ("medium", f"{label} is the only event within {step_text(case.near)} steps before it"),
                case.first.suggestion,
                alternatives=[
                    f"a coincidence: {label} and the anomaly are {step_text(step - at)} step(s) apart"
                ],
            )
    return None


def _torn_resume_point(case: Case, at: float) -> None:
    """A resume after a save that wrote a torn unit: the tear can be in the live run from there on."""
    before = [s for s in case.scene.saves if s.step <= at and s.unit is not None]
    if before and before[-1].unit is not None and before[-1].unit.torn:
        unit = before[-1].unit
        case.evidence.append(
            f"the last save before the resume wrote a torn file, {unit_line(unit)}: if the run resumed from "
            "it, the tear is in the live run from there on"
        )


def unknown(case: Case) -> Conclusion:
    """No rule fits: the cause is unknown and the logs' own suggestion stands; the evidence says what was
    seen."""
    if case.saves_before:
        save = case.saves_before[-1]
        torn = save.unit is not None and save.unit.torn
        case.evidence.append(
            f"a checkpoint save at step {step_text(save.step)} precedes it, but it did not stall logging"
            + ("; the file it wrote is torn, which cannot change the live run" if torn else "")
        )
    elif case.next_unit is not None:
        nxt = case.next_unit
        case.evidence.append(
            f"the next checkpoint, {nxt.relpath} (step {step_text(nxt.step)}), is {nxt.verdict}"
        )
    else:
        case.evidence.append("no checkpoint at or after it to confirm the state")
    first = case.first
    title = f"no cause found for the {KIND_WORD.get(first.kind, first.kind)} in {first.metric}"
    return case.conclude(UNKNOWN, title, ("low", "no rule's evidence is there"), first.suggestion)


# The rules of the module doc, in its order: the first that fits names the cause (``unknown`` always fits).
RULES: tuple[Rule, ...] = (metric_pipeline, save_stall, gradient_explosion, preceding_event, unknown)


def explain(group: list[Finding], scene: Scene) -> Conclusion:
    """The likely cause of one group of anomalies: the first of :data:`RULES` that fits."""
    evidence = [f"log: {a.message}" for a in group]
    lead_in = [a for a in group if leads_into(a, group, scene.logs) is not None]
    if lead_in:
        evidence.append(
            f"{lead_in[0].metric} had been climbing since step {step_text(lead_in[0].step)} and turned "
            f"non-finite at step {step_text(group[0].step)}: one event, the climb into it"
        )
    case = Case(group, scene, evidence)
    for rule in RULES:
        found = rule(case)
        if found is not None:
            return found
    raise AssertionError("the last rule, unknown, fits every case")
