"""What caused what: each anomaly of the logs (or a few at the same steps) joined to the saves, events and
checkpoint units before and after it, and the likely cause named with its evidence.

The rules, in order (:data:`RULES`, one function each; the first that fits names the cause):

- **save raced training**: the anomaly follows a checkpoint save within ``near`` steps, and the unit that save
  wrote is torn (high confidence when the save also stalled logging); **save stalled training**: the save
  stalled logging but wrote a consistent unit.
- **gradient explosion**: no save within ``near`` steps before it, and the first unit at or after it holds
  NaN/Inf in optimizer state (high) or only in weights (medium).
- **resume** / **learning-rate change** / an event named with ``--event``: one within ``near`` steps before.
- otherwise the cause is unknown and the logs' own suggestion stands.

A climb (a divergence) whose last finite row is right before the same metric turns NaN/Inf is the run into
that non-finite value, not an anomaly of its own: it joins the non-finite value's group (the detector saw the
finite values end, not the climb), and the group's cause is the non-finite value's.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainprobe.conventions import step_text
from trainprobe.metrics.findings import Finding
from trainprobe.triage.model import (
    ANOMALY_KINDS,
    EVENT_CAUSE,
    EXPLOSION,
    KIND_WORD,
    LR_CAUSE,
    RESUME_CAUSE,
    SAVE_RACE,
    SAVE_STALL,
    UNKNOWN,
    CheckpointInfo,
    Conclusion,
    SaveMatch,
)

GROUP_STEPS = 3.0


def num(x: Any) -> float:
    """A step or value from the logs' JSON, where non-finite numbers are the strings "nan", "inf", "-inf"."""
    return float(x) if x is not None else float("nan")


def anomalies_of(logs: dict[str, Any] | None) -> tuple[list[Finding], list[dict[str, Any]]]:
    """(anomalies, stalls) among the logs' findings; info-level findings are neither."""
    if not logs:
        return [], []
    anomalies: list[Finding] = []
    stalls: list[dict[str, Any]] = []
    for f in logs["findings"]:
        if f["kind"] == "stall":
            stalls.append(f)
            continue
        if f["kind"] not in ANOMALY_KINDS or f["severity"] == "info":
            continue
        anomalies.append(Finding.from_json(f))
    anomalies.sort(key=lambda a: (a.step, a.run, a.metric))
    return anomalies, stalls


def near_steps(logs: dict[str, Any] | None, units: list[CheckpointInfo]) -> float:
    """How far back an event can explain an anomaly: as ``logs`` does, 2 % of the run (at least 50 steps),
    but never past half the save interval, so a save does not explain what happens a whole interval later."""
    span = 0.0
    if logs:
        for r in logs["runs"]:
            if r.get("first_step") is not None and r.get("last_step") is not None:
                span = max(span, num(r["last_step"]) - num(r["first_step"]))
    near = max(50.0, 0.02 * span)
    steps = sorted({c.step for c in units if c.step is not None})
    if len(steps) >= 3:
        gaps = sorted(b - a for a, b in itertools.pairwise(steps))
        near = min(near, max(2.0, gaps[len(gaps) // 2] / 2))
    return near


def last_finite_before(logs: dict[str, Any] | None, run: str, metric: str, step: float) -> float | None:
    """The last step before ``step`` where ``metric`` of ``run`` is finite (from the logs' series)."""
    series = ((logs or {}).get("series") or {}).get(run, {}).get(metric)
    if not series:
        return None
    found = [
        float(s)
        for s, v in zip(series["steps"], series["values"], strict=True)
        if v is not None and not isinstance(v, str) and not isinstance(s, str) and float(s) < step
    ]
    return max(found, default=None)


def _leads_into(a: Finding, anomalies: list[Finding], logs: dict[str, Any] | None) -> Finding | None:
    """The non-finite anomaly a divergence runs into: the divergence ends at the metric's last finite row
    before it (a climb that came back down first is an anomaly of its own), or None."""
    if a.kind != "divergence":
        return None
    for b in anomalies:
        if b.kind != "non_finite" or b.run != a.run or b.metric != a.metric or b.step < a.end_step:
            continue
        last = last_finite_before(logs, a.run, a.metric, b.step)
        if last is not None and a.end_step >= last:
            return b
    return None


def group(anomalies: list[Finding], logs: dict[str, Any] | None = None) -> list[list[Finding]]:
    """Anomalies within :data:`GROUP_STEPS` of the first of a group are one group; a climb into a non-finite
    value joins that value's group, after it (the group's first anomaly names its step)."""
    lead_ins = {id(a): b for a in anomalies if (b := _leads_into(a, anomalies, logs)) is not None}
    groups: list[list[Finding]] = []
    for a in anomalies:
        if id(a) in lead_ins:
            continue
        if groups and a.step - groups[-1][0].step <= GROUP_STEPS:
            groups[-1].append(a)
        else:
            groups.append([a])
    for a in anomalies:
        into = lead_ins.get(id(a))
        if into is not None:
            next(g for g in groups if any(x is into for x in g)).append(a)
    return groups


@dataclass
class Save:
    """A save as the explanation sees it: from a log line (with the unit it wrote, when found) or from a unit
    no log line names."""

    step: float
    text: str
    source: str
    stall_s: float | None
    unit: CheckpointInfo | None


def saves_for(matches: list[SaveMatch], units: list[CheckpointInfo]) -> list[Save]:
    by_rel = {u.relpath: u for u in units}
    out = [
        Save(m.step, m.text, "log line", m.stall_s, by_rel.get(m.unit) if m.unit else None) for m in matches
    ]
    named = {m.unit for m in matches if m.unit}
    logged_steps = {m.step for m in matches}
    for u in units:
        if u.relpath not in named and u.step is not None and float(u.step) not in logged_steps:
            out.append(
                Save(float(u.step), u.relpath, f"checkpoint unit (step from its {u.step_source})", None, u)
            )
    return sorted(out, key=lambda s: s.step)


def _stall_near(save: Save, stalls: list[dict[str, Any]]) -> float | None:
    if save.stall_s:
        return float(save.stall_s)
    for s in stalls:
        if num(s["step"]) - 1 <= save.step <= num(s["end_step"]):
            return float(s["value"])
    return None


def _first_after(step: float, units: list[CheckpointInfo]) -> CheckpointInfo | None:
    later = [c for c in units if c.step is not None and c.step >= step]
    return min(later, key=lambda c: (c.step or 0, c.relpath)) if later else None


def _unit_line(c: CheckpointInfo) -> str:
    return f"{c.relpath} (step {step_text(c.step)} from its {c.step_source})"


@dataclass
class Case:
    """One group of anomalies and what surrounds it, as the rules weigh it; ``evidence`` collects what the
    report says for the conclusion (the logs' messages first)."""

    group: list[Finding]
    near: float
    saves: list[Save]
    stalls: list[dict[str, Any]]
    events: dict[str, list[dict[str, Any]]]
    units: list[CheckpointInfo]
    evidence: list[str]

    @property
    def first(self) -> Finding:
        return self.group[0]

    @property
    def step(self) -> float:
        return self.group[0].step

    @functools.cached_property
    def saves_before(self) -> list[Save]:
        """The saves at most ``near`` steps before the group."""
        return [s for s in self.saves if s.step <= self.step and self.step - s.step <= self.near]

    @functools.cached_property
    def next_unit(self) -> CheckpointInfo | None:
        return _first_after(self.step, self.units)

    def conclude(
        self, cause: str, title: str, confidence: str, suggestion: str, checkpoint: str | None = None
    ) -> Conclusion:
        return Conclusion(
            cause, title, confidence, self.step, self.group, self.evidence, suggestion, checkpoint=checkpoint
        )


Rule = Callable[[Case], Conclusion | None]


def save_race_or_stall(case: Case) -> Conclusion | None:
    """The last save before the group wrote a torn unit (raced), or stalled logging (stalled)."""
    if not case.saves_before:
        return None
    save = case.saves_before[-1]
    stall = _stall_near(save, case.stalls)
    ckpt = save.unit
    torn = ckpt is not None and ckpt.torn
    if not (stall or torn):
        return None
    case.evidence.append(
        f"{step_text(case.step - save.step)} step(s) after the checkpoint save at step "
        f"{step_text(save.step)} ({save.source}: {save.text[:120]})"
    )
    if stall:
        case.evidence.append(f"that save stalled logging {stall:.1f} s")
    if ckpt is not None:
        case.evidence.append(
            f"the checkpoint it wrote, {_unit_line(ckpt)}, "
            + (f"is torn: {ckpt.reason}" if torn else f"is {ckpt.verdict}: {ckpt.reason}")
        )
    else:
        case.evidence.append(
            f"no checkpoint unit on disk is the one the save at step {step_text(save.step)} wrote"
        )
    path = ckpt.path if ckpt else None
    if torn:
        return case.conclude(
            SAVE_RACE,
            f"the checkpoint save at step {step_text(save.step)} raced training",
            "high" if stall else "medium",
            "save a consistent snapshot without blocking the loop (copy the state, then write it in the "
            "background: trainprobe.save.CheckpointWriter), and do not resume from the torn checkpoint",
            checkpoint=path,
        )
    return case.conclude(
        SAVE_STALL,
        f"the checkpoint save at step {step_text(save.step)} stalled training",
        "medium",
        "take the save off the training thread (trainprobe.save.CheckpointWriter blocks only for a copy) or "
        "save to faster storage",
        checkpoint=path,
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
        f"the next checkpoint, {_unit_line(nxt)}, holds NaN/Inf "
        + (f"in optimizer state ({len(opt_bad)}+ tensors): " if opt_bad else "in weights: ")
        + nxt.describe_nonfinite()
    )
    prev = [c for c in case.units if c.step is not None and c.step < step]
    if prev:
        last = max(prev, key=lambda c: c.step or 0)
        case.evidence.append(
            f"the checkpoint before it, {last.relpath} (step {step_text(last.step)}), is {last.verdict}"
        )
    return case.conclude(
        EXPLOSION,
        f"a gradient explosion at step {step_text(step)} blew up the "
        + ("optimizer state" if opt_bad else "weights"),
        "high" if opt_bad else "medium",
        f"inspect the batch(es) at step {step_text(step)}, clip gradients / skip non-finite steps, and "
        "resume from the last healthy checkpoint",
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
            for e in case.events.get(case.first.run, [])
            if e["kind"] == kind and num(e["step"]) <= step and step - num(e["step"]) <= case.near
        ]
        if evs:
            at = num(evs[-1]["step"])
            case.evidence.append(
                f"{step_text(step - at)} step(s) after {label} at step {step_text(at)}: {evs[-1]['text']}"
            )
            return case.conclude(cause, f"{label} at step {step_text(at)}", "medium", case.first.suggestion)
    return None


def unknown(case: Case) -> Conclusion:
    """No rule fits: the cause is unknown and the logs' own suggestion stands; the evidence says what was
    seen."""
    if case.saves_before:
        case.evidence.append(
            f"a checkpoint save at step {step_text(case.saves_before[-1].step)} precedes it, but it neither "
            "stalled logging nor wrote a torn checkpoint"
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
    return case.conclude(UNKNOWN, title, "low", first.suggestion)


# The rules of the module doc, in its order: the first that fits names the cause (``unknown`` always fits).
RULES: tuple[Rule, ...] = (save_race_or_stall, gradient_explosion, preceding_event, unknown)


def explain(
    group: list[Finding],
    near: float,
    saves: list[Save],
    stalls: list[dict[str, Any]],
    events: dict[str, list[dict[str, Any]]],
    units: list[CheckpointInfo],
    logs: dict[str, Any] | None = None,
) -> Conclusion:
    """The likely cause of one group of anomalies: the first of :data:`RULES` that fits."""
    evidence = [f"log: {a.message}" for a in group]
    lead_in = [a for a in group if _leads_into(a, group, logs) is not None]
    if lead_in:
        evidence.append(
            f"{lead_in[0].metric} had been climbing since step {step_text(lead_in[0].step)} and turned "
            f"non-finite at step {step_text(group[0].step)}: one event, the climb into it"
        )
    case = Case(group, near, saves, stalls, events, units, evidence)
    for rule in RULES:
        found = rule(case)
        if found is not None:
            return found
    raise AssertionError("the last rule, unknown, fits every case")


def merge(conclusions: list[Conclusion]) -> list[Conclusion]:
    """One conclusion per cause: anomalies that follow the same save (or share a title) are joined."""
    out: list[Conclusion] = []
    for c in conclusions:
        prev = out[-1] if out else None
        if prev is not None and prev.cause == c.cause and prev.title == c.title and c.cause != UNKNOWN:
            prev.anomalies.extend(c.anomalies)
            logs = [e for e in c.evidence if e.startswith("log: ")]
            at = sum(1 for e in prev.evidence if e.startswith("log: "))
            prev.evidence[at:at] = logs
            continue
        out.append(c)
    return out
