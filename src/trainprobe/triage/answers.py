"""The four answers a user asks for, in the order they ask: (a) what is broken where (NaN/Inf by tensor, torn
units by step group), (b) what the logs show (spikes, stalls, cliffs, with the events before them), (c) what
caused what, (d) which unit to resume from and why. Each is data (for ``--json``) with the lines a terminal,
an MCP summary or the HTML report prints."""

from __future__ import annotations

import os
from typing import Any

from trainprobe.conventions import step_text
from trainprobe.metrics.findings import Finding
from trainprobe.metrics.log_facts import LogFact
from trainprobe.triage.model import (
    CheckpointInfo,
    Conclusion,
    Disagreement,
    Duplicate,
    Problem,
    anomaly_json,
)

_LABELS = ("name", "directory")


def label_step(unit: CheckpointInfo) -> int | None:
    """The step a unit's name (or its folder's) says, when the unit records another one itself: the name is
    then misleading (a relabelled copy, an epoch number). None when the name agrees, says nothing, or is all
    the unit has."""
    if unit.step is None or unit.step_source in _LABELS:
        return None
    said = [s.get("value") for s in unit.step_sources if s.get("source") in _LABELS]
    return next((v for v in said if isinstance(v, int) and v != unit.step), None)


def resume_from(
    units: list[CheckpointInfo], conclusions: list[Conclusion]
) -> tuple[CheckpointInfo | None, str]:
    """The latest healthy unit (check's verdict: finite and not torn) from before the first lasting anomaly's
    conclusion, and why. A climb into a NaN counts from the NaN (its conclusion's step). Of units at the same
    step, one whose name agrees with its content is preferred to one whose name says another step; a copy of
    the pick under a misleading name is said."""
    lasting = [c.step for c in conclusions if any(a.lasting for a in c.anomalies)]
    bad_from = min(lasting, default=None)
    ordered = sorted(
        units,
        key=lambda c: (c.step if c.step is not None else -1, label_step(c) is None, c.mtime or 0),
    )
    healthy = [c for c in ordered if c.healthy]
    if bad_from is not None:
        healthy = [c for c in healthy if c.step is not None and c.step < bad_from]
    if not healthy:
        if not units:
            return None, "no checkpoint found in the run directory"
        return None, "no checkpoint is healthy" + (
            f" before step {step_text(bad_from)}" if bad_from is not None else ""
        )
    best = healthy[-1]
    consistency = (
        "one consistent snapshot"
        if best.verdict == "consistent"
        else f"{best.verdict} ({best.reason})"
        if best.reason
        else best.verdict
    )
    why = f"the latest checkpoint that is finite and not torn — check: {consistency}"
    if bad_from is not None:
        why += f"; saved before the lasting anomaly at step {step_text(bad_from)}"
    skipped = [c for c in ordered if not c.healthy and (c.step or -1) > (best.step or -1)]
    if skipped:
        why += f"; later ones are not healthy ({', '.join(f'{c.relpath}: {c.verdict}' for c in skipped[:4])})"
    return best, why + _copies(best, units)


def _copies(best: CheckpointInfo, units: list[CheckpointInfo]) -> str:
    """What the resume advice says of the pick's copies: those under a misleading name by name, the rest as
    the same tensors."""
    by_rel = {u.relpath: u for u in units}
    misnamed = [
        (rel, said)
        for rel in best.identical_to
        if rel in by_rel and (said := label_step(by_rel[rel])) is not None
    ]
    out = "".join(
        f"; {rel} is the same {'bytes' if rel in best.byte_identical_to else 'tensors'} under a misleading "
        f"name (it says step {said}, its contents step {step_text(by_rel[rel].step)})"
        for rel, said in misnamed
    )
    others = [rel for rel in best.identical_to if rel not in dict(misnamed)]
    if others:
        out += f"; it holds the same tensors as {', '.join(others)}"
    return out


def _stale_line(u: CheckpointInfo) -> str:
    """A unit holding an earlier unit's optimizer moments bit for bit under a later step."""
    s = u.between["stale"]
    return (
        f"stale: {u.relpath} (step {step_text(u.step)}) holds the state of {s['other']} (step "
        f"{step_text(s['other_step'])}): {s['shared']} of its {s['tensors']} tensors are bit-identical to "
        f"that unit's, {s['moments_shared']} optimizer moment(s) among them, while it records step "
        f"{step_text(u.step)} — a moment changes at every optimizer step, so this is an earlier state under "
        "a later step (a stale save relabelled, or state copied from another unit), not a run that moved"
    )


def _frozen_line(u: CheckpointInfo) -> str:
    """Tensors identical to an earlier unit's with no moment among them: what a healthy run shows too."""
    f = u.between["frozen"]
    moved = f" and its {f['moments_held']} moment(s) moved" if f["moments_held"] else ""
    return (
        f"frozen layers: {u.relpath} (step {step_text(u.step)}) shares {f['shared']} of its {f['tensors']} "
        f"tensors with {f['other']} (step {step_text(f['other_step'])}), no optimizer moment among them"
        f"{moved}: frozen layers (or parameters the optimizer does not update), "
        + ("not a stale save" if f["moments_held"] else "or a save of the same weights")
    )


def _torn_line(u: CheckpointInfo) -> str:
    """Two of the run's steps by the counters, else what check found (a fresh optimizer's moments under
    later counters is no mix of steps: check's reason names it)."""
    groups = ", ".join(f"step {s}: {n} tensor(s)" for s, n in u.step_groups.items())
    if groups:
        return f"torn: {u.relpath} (step {step_text(u.step)}) mixes training steps — {groups}"
    return f"torn: {u.relpath} (step {step_text(u.step)}) — {u.reason}"


def _broken(
    units: list[CheckpointInfo], duplicates: list[Duplicate], disagreements: list[Disagreement]
) -> dict[str, Any]:
    nonfinite = [u for u in units if u.has_nonfinite]
    torn = [u for u in units if u.torn]
    stale = [u for u in units if "stale" in u.between]
    other = [u for u in units if not u.healthy and u not in nonfinite + torn + stale]
    lines: list[str] = []
    for u in nonfinite:
        lines.append(
            f"NaN/Inf in {u.relpath} (step {step_text(u.step)}): {u.nonfinite_values:,} value(s) in "
            f"{u.nonfinite_tensors} tensor(s) — {u.describe_nonfinite(5)}"
        )
    lines += [_torn_line(u) for u in torn] + [_stale_line(u) for u in stale]
    for u in other:
        lines.append(f"{u.verdict}: {u.relpath} (step {step_text(u.step)}) — {u.reason}")
    if not lines:
        lines.append(
            f"nothing: every one of {len(units)} checkpoint(s) is finite and not torn"
            if units
            else "no checkpoint found"
        )
    lines += [_frozen_line(u) for u in units if "frozen" in u.between and "stale" not in u.between]
    for d in duplicates:
        lines.append(
            ("byte-identical copies: " if d.bytes else "the same tensors (not the same bytes): ")
            + ", ".join(d.units)
        )
    lines.extend(f"step disagreement: {d.why}" for d in disagreements)
    return {
        "lines": lines,
        "nonfinite": [
            {"unit": u.relpath, "step": u.step, "values": u.nonfinite_values, "tensors": u.nonfinite}
            for u in nonfinite
        ],
        "torn": [
            {"unit": u.relpath, "step": u.step, "step_groups": u.step_groups, "reason": u.reason}
            for u in torn
        ],
        "other": [
            {"unit": u.relpath, "step": u.step, "verdict": u.verdict, "reason": u.reason} for u in other
        ],
    }


def _logs(
    logs: dict[str, Any] | None, log_files: list[str], problems: list[Problem], anomalies: list[Finding],
    stalls: list[dict[str, Any]], facts: list[LogFact],
) -> dict[str, Any]:  # fmt: skip
    not_read = [p for p in problems if p.kind == "log-not-read"]
    lines: list[str] = []
    shown = sorted(
        [(a.step, a.kind, a.metric, a.message) for a in anomalies]
        + [(float(s["step"]), "stall", s.get("metric", ""), s["message"]) for s in stalls],
        key=lambda t: t[0],
    )
    for step, kind, metric, message in shown:
        lines.append(f"step {step_text(step)}: {kind} in {metric} — {message}")
    read = [f for f in log_files if f not in {p.path for p in not_read}]
    if not logs:
        lines.insert(0, "no log read: " + ("; ".join(p.text() for p in not_read) or "no training log found"))
    elif not shown:
        lines.append(f"no anomalies in the {len(read)} log file(s) read")
    if logs and not_read:
        lines.append("not read: " + "; ".join(p.text() for p in not_read))
    partly = [p for p in problems if p.kind == "log-partly-read"]
    if partly:
        lines.append("partly read: " + "; ".join(p.text() for p in partly))
    lines.extend(f"fact: {f.text}" for f in facts)
    return {
        "read": read,
        "facts": [f.to_json() for f in facts],
        "not_read": [p.path for p in not_read],
        "lines": lines,
        "findings": [anomaly_json(a) for a in anomalies]
        + [
            {"kind": "stall", "metric": s.get("metric"), "step": s["step"], "message": s["message"]}
            for s in stalls
        ],
    }


def _causes(conclusions: list[Conclusion]) -> dict[str, Any]:
    lines = [f"step {step_text(c.step)}: {c.title} ({c.confidence} confidence)" for c in conclusions]
    return {"lines": lines or ["nothing to explain"], "causes": [c.cause for c in conclusions]}


def _resume(unit: CheckpointInfo | None, why: str) -> dict[str, Any]:
    if unit is None:
        return {
            "unit": None,
            "path": None,
            "step": None,
            "why": why,
            "lines": [f"no checkpoint to resume from: {why}"],
        }
    return {
        "unit": unit.relpath,
        "path": unit.path,
        "step": unit.step,
        "why": why,
        "lines": [f"resume from {unit.relpath} (step {step_text(unit.step)}): {why}"],
    }


def four_answers(
    *,
    units: list[CheckpointInfo],
    duplicates: list[Duplicate],
    disagreements: list[Disagreement],
    logs: dict[str, Any] | None,
    log_files: list[str],
    problems: list[Problem],
    anomalies: list[Finding],
    stalls: list[dict[str, Any]],
    facts: list[LogFact],
    conclusions: list[Conclusion],
    resume: CheckpointInfo | None,
    resume_why: str,
) -> dict[str, Any]:
    """``answers`` of the report: ``broken``, ``logs``, ``causes``, ``resume``, in that order."""
    return {
        "broken": _broken(units, duplicates, disagreements),
        "logs": _logs(logs, log_files, problems, anomalies, stalls, facts),
        "causes": _causes(conclusions),
        "resume": _resume(resume, resume_why),
    }


def short_path(path: str, root: str) -> str:
    """A path relative to the run dir when inside it."""
    try:
        rel = os.path.relpath(path, root)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel
