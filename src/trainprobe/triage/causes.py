"""What caused what: the anomalies of the logs grouped into incidents, each joined to the saves, stalls,
events and checkpoint units around it (a :class:`Scene`), and its cause named by the first rule of
:mod:`trainprobe.triage.rules` that fits; a torn unit is a finding of its own
(:mod:`trainprobe.triage.tears`), joined to the incidents by time, never their cause.

Anomalies within :data:`GROUP_STEPS` of the first of a group are one incident. A climb (a divergence) whose
last finite row is right before the same metric turns NaN/Inf is the run into that non-finite value, not an
anomaly of its own: it joins the non-finite value's group (the detector saw the finite values end, not the
climb), and the group's cause is the non-finite value's.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from typing import Any

from trainprobe.conventions import step_text
from trainprobe.metrics.findings import Finding
from trainprobe.triage.model import ANOMALY_KINDS, UNKNOWN, CheckpointInfo, Conclusion, SaveMatch

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


def leads_into(a: Finding, anomalies: list[Finding], logs: dict[str, Any] | None) -> Finding | None:
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
    lead_ins = {id(a): b for a in anomalies if (b := leads_into(a, anomalies, logs)) is not None}
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


def stall_near(save: Save, stalls: list[dict[str, Any]]) -> float | None:
    """Seconds the log's clock stood still at ``save`` (its own stall, or a stall found around its step)."""
    if save.stall_s:
        return float(save.stall_s)
    for s in stalls:
        if num(s["step"]) - 1 <= save.step <= num(s["end_step"]):
            return float(s["value"])
    return None


def first_after(step: float, units: list[CheckpointInfo]) -> CheckpointInfo | None:
    later = [c for c in units if c.step is not None and c.step >= step]
    return min(later, key=lambda c: (c.step or 0, c.relpath)) if later else None


def unit_line(c: CheckpointInfo) -> str:
    return f"{c.relpath} (step {step_text(c.step)} from its {c.step_source})"


@dataclass
class Scene:
    """What surrounds every anomaly of a run: the saves, stalls, events and units, the logs' JSON, how far
    back an event explains (``near``), and the saves that stalled logging with an anomaly right after them
    (the repeat the save-stall rule weighs)."""

    near: float
    saves: list[Save]
    stalls: list[dict[str, Any]]
    events: dict[str, list[dict[str, Any]]]
    units: list[CheckpointInfo]
    logs: dict[str, Any] | None = None
    stalled_then_anomaly: list[float] = field(default_factory=list)
    stalled: int = 0  # how many of the saves stalled logging

    def has_clock(self, run: str) -> bool:
        """Whether the log of ``run`` has a wall clock (without one, no stall can be measured)."""
        return any(r.get("has_wall_clock") for r in (self.logs or {}).get("runs", []) if r["name"] == run)


@dataclass
class Case:
    """One group of anomalies and its scene, as the rules weigh it; ``evidence`` collects what the report
    says for the conclusion (the logs' messages first)."""

    group: list[Finding]
    scene: Scene
    evidence: list[str]

    @property
    def first(self) -> Finding:
        return self.group[0]

    @property
    def step(self) -> float:
        return self.group[0].step

    @property
    def near(self) -> float:
        return self.scene.near

    @functools.cached_property
    def saves_before(self) -> list[Save]:
        """The saves at most ``near`` steps before the group."""
        return [s for s in self.scene.saves if s.step <= self.step and self.step - s.step <= self.near]

    @functools.cached_property
    def next_unit(self) -> CheckpointInfo | None:
        return first_after(self.step, self.scene.units)

    def conclude(
        self,
        cause: str,
        title: str,
        confidence: tuple[str, str],
        suggestion: str,
        *,
        alternatives: list[str] | None = None,
        checkpoint: str | None = None,
    ) -> Conclusion:
        """The conclusion, its ``confidence`` a (level, the rule that gave it) pair; the evidence ends with
        that rule and the alternatives not ruled out."""
        level, rule = confidence
        alternatives = alternatives or []
        evidence = [*self.evidence, f"{level} confidence: {rule}"]
        evidence += [f"not ruled out: {a}" for a in alternatives]
        return Conclusion(
            cause, title, level, self.step, self.group, evidence, suggestion, checkpoint=checkpoint,
            confidence_rule=rule, alternatives=alternatives,
        )  # fmt: skip


def stalled_then_anomaly(
    groups: list[list[Finding]], saves: list[Save], stalls: list[dict[str, Any]], near: float
) -> list[float]:
    """The saves that stalled logging and are the last save at most ``near`` steps before an incident."""
    out: set[float] = set()
    for g in groups:
        before = [s for s in saves if s.step <= g[0].step and g[0].step - s.step <= near]
        if before and stall_near(before[-1], stalls):
            out.add(before[-1].step)
    return sorted(out)


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
