"""Join what the logs and the checkpoint units say on one timeline, and conclude.

Input: the JSON :func:`trainprobe.triage.collect.collect` returns (here or from a far machine). Output: a
:class:`~trainprobe.triage.model.TriageReport`: first what could not be read, then each unit as ``check``
judged it (:mod:`.units`), the saves of the log matched to the units they wrote and the step disagreements
(:mod:`.saves`), duplicates, the causes of the anomalies (:mod:`.causes`), the timeline, and the four answers
(:mod:`.answers`).
"""

from __future__ import annotations

from typing import Any

from trainprobe.conventions import is_sure_log_name
from trainprobe.metrics.findings import Finding
from trainprobe.metrics.log_facts import LogFact
from trainprobe.triage.answers import four_answers, resume_from, short_path
from trainprobe.triage.causes import (
    Scene,
    anomalies_of,
    group,
    merge,
    near_steps,
    num,
    saves_for,
    stall_near,
    stalled_then_anomaly,
)
from trainprobe.triage.facts import unit_facts
from trainprobe.triage.model import Conclusion, Problem, TimelineItem, TriageReport
from trainprobe.triage.rules import explain
from trainprobe.triage.saves import disagreements, match_saves
from trainprobe.triage.tears import join_by_time, torn_findings
from trainprobe.triage.units import checkpoint_info, duplicates


def not_read(collected: dict[str, Any]) -> list[Problem]:
    """The logs that could not be read: an error while reading, or a log-named file without metric rows;
    and those read only in part (``logs``' coverage: more numeric lines of a repeating shape missed than
    read), which are never taken as healthy either."""
    root = collected["run_dir"]
    out = []
    for s in collected.get("logs_skipped", []):
        if s["why"] != "no metric rows" or is_sure_log_name(s["path"]):
            out.append(Problem("log-not-read", short_path(s["path"], root), s["why"]))
    for p in (collected.get("logs") or {}).get("partly_read", []):
        out.append(Problem("log-partly-read", short_path(p["path"], root), p["why"]))
    return out


def _events(logs: dict[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    if not logs:
        return {}
    return {r["name"]: list(r.get("events", [])) for r in logs["runs"]}


def _timeline(
    report: TriageReport, events: dict[str, list[dict[str, Any]]], stalls: list[dict[str, Any]]
) -> None:
    items = report.timeline
    for run, evs in events.items():
        for e in evs:
            if e["kind"] in ("eval", "epoch") or isinstance(e["step"], str):
                continue
            text = e["text"] or e["kind"]
            if e.get("stall_s"):
                text += f" (stalled logging {e['stall_s']:.1f} s)"
            items.append(TimelineItem(float(e["step"]), "event", e["kind"], text, path=run))
    for s in stalls:
        items.append(TimelineItem(num(s["step"]), "event", "stall", s["message"], severity=s["severity"]))
    for a in report.anomalies:
        items.append(TimelineItem(a.step, "anomaly", a.kind, a.message, severity=a.severity, path=a.run))
    for c in report.checkpoints:
        if c.step is not None:
            items.append(
                TimelineItem(float(c.step), "checkpoint", c.verdict, f"{c.relpath}: {c.verdict}", path=c.path)
            )
    order = {"event": 0, "checkpoint": 1, "anomaly": 2}
    items.sort(key=lambda t: (t.step, order[t.kind]))


def _conclusions(anomalies: list[Finding], stalls: list[dict[str, Any]], scene: Scene) -> list[Conclusion]:
    """The incidents' causes (:mod:`.rules`) and the torn units' findings (:mod:`.tears`), joined by time."""
    groups = group(anomalies, scene.logs)
    scene.stalled_then_anomaly = stalled_then_anomaly(groups, scene.saves, stalls, scene.near)
    scene.stalled = sum(1 for s in scene.saves if stall_near(s, stalls))
    explained = merge([explain(g, scene) for g in groups])
    return join_by_time(explained + torn_findings(scene.saves, scene.units, scene.events))


def conclude(collected: dict[str, Any], *, target: str | None = None) -> TriageReport:
    """Build the triage report from :func:`~trainprobe.triage.collect.collect`'s JSON."""
    units = [checkpoint_info(e) for e in collected["units"]]
    logs = collected.get("logs")
    events = _events(logs)
    saves = match_saves(events, units)
    units.sort(key=lambda c: (c.step if c.step is not None else float("inf"), c.relpath))
    anomalies, stalls = anomalies_of(logs)
    near = near_steps(logs, units)
    conclusions = _conclusions(
        anomalies, stalls, Scene(near, saves_for(saves, units), stalls, events, units, logs)
    )
    facts = [LogFact.from_json(f) for f in collected.get("log_facts", [])]
    facts += unit_facts(saves, units, collected.get("saved_paths") or {})
    resume, why = resume_from(units, conclusions)
    problems = not_read(collected) + [
        Problem("unit-not-read", c.relpath, c.reason) for c in units if c.verdict == "unreadable"
    ]
    report = TriageReport(
        run_dir=collected["run_dir"],
        target=target,
        host=collected.get("host", ""),
        log_files=list(collected.get("log_files", [])),
        logs_skipped=list(collected.get("logs_skipped", [])),
        logs=logs,
        checkpoints=units,
        timeline=[],
        conclusions=conclusions,
        resume_from=resume,
        resume_reason=why,
        seconds=float(collected.get("seconds", 0.0)),
        near_steps=near,
        anomalies=anomalies,
        problems=problems,
        saves=saves,
        disagreements=disagreements(units),
        duplicates=duplicates(units),
        facts=facts,
    )
    _timeline(report, events, stalls)
    report.answers = four_answers(
        units=units,
        duplicates=report.duplicates,
        disagreements=report.disagreements,
        logs=logs,
        log_files=[short_path(f, report.run_dir) for f in report.log_files],
        problems=problems,
        anomalies=anomalies,
        stalls=stalls,
        facts=facts,
        conclusions=conclusions,
        resume=resume,
        resume_why=why,
    )
    return report
