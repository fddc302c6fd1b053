"""Join what the logs and the checkpoints say on one timeline, and conclude.

Input: the JSON :func:`trainprobe.triage.collect.collect` returns (locally or from a far machine). Output: a
:class:`TriageReport`: each checkpoint with its step (and where that step came from) and verdict, a timeline
of events, anomalies and checkpoints, the likely cause of each anomaly with the evidence that points to it,
and the last healthy checkpoint to resume from.

The rules, in order (the first that fits names the cause):

- **save raced training**: the anomaly follows a checkpoint save within ``near`` steps, and the checkpoint
  it wrote is torn (high confidence when the save also stalled logging); **save stalled training**: the save
  stalled logging but wrote a consistent file.
- **gradient explosion**: no save within ``near`` steps before it, and the first checkpoint at or after it
  holds NaN/Inf in optimizer state (high) or only in weights (medium).
- **resume** / **learning-rate change** / an event named with ``--event``: one within ``near`` steps before.
- otherwise the cause is unknown and the logs' own suggestion stands.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1

# The words of trainprobe.checkpoint.verdict (not imported: conclude runs where numpy may be missing).
CLEAN, SUSPICIOUS, NONFINITE, TORN, CORRUPT, UNREADABLE = (
    "clean",
    "suspicious",
    "nonfinite",
    "torn",
    "corrupt",
    "unreadable",
)
_VERDICT_ORDER = (SUSPICIOUS, NONFINITE, TORN, CORRUPT, UNREADABLE)
ANOMALY_KINDS = ("spike", "cliff", "non_finite", "divergence", "missing_value")
SAVE_RACE, SAVE_STALL, EXPLOSION, RESUME_CAUSE, LR_CAUSE, EVENT_CAUSE, UNKNOWN = (
    "save-race",
    "save-stall",
    "gradient-explosion",
    "resume",
    "lr-change",
    "event",
    "unknown",
)
_GROUP_STEPS = 3.0
_KIND_WORD = {"non_finite": "NaN/Inf", "missing_value": "missing value"}


def _j(x: float) -> int | float:
    """A step for JSON: an int when it is one."""
    return int(x) if float(x).is_integer() else float(x)


def _fmt(step: float | None) -> str:
    if step is None:
        return "?"
    return str(int(step)) if float(step).is_integer() else f"{step:g}"


@dataclass
class CheckpointInfo:
    path: str
    relpath: str
    step: int | None
    step_source: str
    verdict: str
    problems: list[str]
    reason: str
    nonfinite: list[dict[str, Any]]
    bytes: int = 0
    mtime: float | None = None
    format: str | None = None
    consistency: str = ""

    @property
    def healthy(self) -> bool:
        return self.verdict == CLEAN

    @property
    def optimizer_nonfinite(self) -> list[dict[str, Any]]:
        return [t for t in self.nonfinite if t.get("optimizer_state")]

    def describe_nonfinite(self, limit: int = 3, *, optimizer_first: bool = True) -> str:
        parts = []
        ordered = (
            sorted(self.nonfinite, key=lambda t: not t.get("optimizer_state"))
            if optimizer_first
            else self.nonfinite
        )
        for t in ordered[:limit]:
            label = f"{t['name']} ({t['param_name']})" if t.get("param_name") else t["name"]
            counts = ", ".join(
                f"{t[k]} {name}"
                for k, name in (("nan", "NaN"), ("posinf", "+Inf"), ("neginf", "−Inf"))
                if t[k]
            )
            parts.append(f"{label}: {counts}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "relpath": self.relpath,
            "step": self.step,
            "step_source": self.step_source,
            "verdict": self.verdict,
            "problems": self.problems,
            "reason": self.reason,
            "consistency": self.consistency,
            "nonfinite_tensors": self.nonfinite,
            "bytes": self.bytes,
            "mtime": self.mtime,
            "format": self.format,
        }


@dataclass
class Anomaly:
    kind: str
    severity: str
    run: str
    metric: str
    step: float
    end_step: float
    message: str
    suggestion: str
    recovered: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "run": self.run,
            "metric": self.metric,
            "step": _j(self.step),
            "end_step": _j(self.end_step),
            "message": self.message,
            "recovered": self.recovered,
        }


@dataclass
class Conclusion:
    """The likely cause of one anomaly (or of a few at the same steps), with the evidence for it."""

    cause: str
    title: str
    confidence: str
    step: float
    anomalies: list[Anomaly]
    evidence: list[str]
    suggestion: str
    checkpoint: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "title": self.title,
            "confidence": self.confidence,
            "step": _j(self.step),
            "anomalies": [a.to_json() for a in self.anomalies],
            "evidence": self.evidence,
            "suggestion": self.suggestion,
            "checkpoint": self.checkpoint,
        }


@dataclass
class TimelineItem:
    step: float
    kind: str  # event | anomaly | checkpoint
    type: str
    text: str
    severity: str | None = None
    path: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": _j(self.step),
            "kind": self.kind,
            "type": self.type,
            "text": self.text,
            "severity": self.severity,
            "path": self.path,
        }


@dataclass
class TriageReport:
    run_dir: str
    target: str | None
    host: str
    log_files: list[str]
    logs_skipped: list[dict[str, str]]
    logs: dict[str, Any] | None
    checkpoints: list[CheckpointInfo]
    timeline: list[TimelineItem]
    conclusions: list[Conclusion]
    resume_from: CheckpointInfo | None
    resume_reason: str
    seconds: float
    near_steps: float
    anomalies: list[Anomaly] = field(default_factory=list)

    @property
    def problems(self) -> int:
        return len(self.anomalies) + sum(not c.healthy for c in self.checkpoints)

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0

    @property
    def verdict(self) -> str:
        return "problems" if self.problems else "healthy"

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for c in self.checkpoints:
            counts[c.verdict] = counts.get(c.verdict, 0) + 1
        return {
            "schema_version": SCHEMA_VERSION,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "run_dir": self.run_dir,
            "target": self.target,
            "host": self.host,
            "summary": {
                "anomalies": len(self.anomalies),
                "checkpoints": counts,
                "causes": [c.cause for c in self.conclusions],
            },
            "resume_from": None
            if self.resume_from is None
            else {"path": self.resume_from.path, "step": self.resume_from.step, "why": self.resume_reason},
            "conclusions": [c.to_json() for c in self.conclusions],
            "checkpoints": [c.to_json() for c in self.checkpoints],
            "timeline": [t.to_json() for t in self.timeline],
            "log_files": self.log_files,
            "logs_skipped": self.logs_skipped,
            "near_steps": _j(self.near_steps),
            "seconds": self.seconds,
            "logs": self.logs,
        }


# -- checkpoints ---------------------------------------------------------------------------------------------


def checkpoint_info(entry: dict[str, Any]) -> CheckpointInfo:
    """One checkpoint's verdict and step, from its collected scan and check."""
    if entry.get("step_in_manifest") is not None:
        step, source = int(entry["step_in_manifest"]), "CheckpointWriter manifest"
    elif entry.get("step_in_file") is not None:
        step, source = int(entry["step_in_file"]), str(entry.get("step_source_in_file") or "step field")
    elif entry.get("step_in_name") is not None:
        step, source = int(entry["step_in_name"]), "file name"
    elif entry.get("step_at_mtime"):
        m = entry["step_at_mtime"]
        step = int(m["step"])
        source = f"mtime vs the wall clock of log '{m['run']}'"
    else:
        step, source = None, "nothing (no step field, manifest, number in the name or wall clock)"
    scan, check = entry["scan"], entry["check"]
    problems: list[str] = []
    reason = check.get("reason") or ""
    if check["verdict"] == SUSPICIOUS or scan["verdict"] == SUSPICIOUS:
        problems.append(SUSPICIOUS)
        reason = "; ".join(scan["notes"]) or reason
    if scan["nonfinite"] or any(e.get("indicates") in (NONFINITE, "non-finite") for e in check["failed"]):
        problems.append(NONFINITE)
    if check["verdict"] == "torn" or any(e.get("indicates") == TORN for e in check["failed"]):
        problems.append(TORN)
    if check["verdict"] == "corrupt" or scan["verdict"] == "corrupt":
        problems.append(CORRUPT)
    if check["verdict"] == "unreadable" or scan["verdict"] == "unreadable":
        problems.append(UNREADABLE)
        reason = scan.get("error") or reason
    verdict = next((v for v in _VERDICT_ORDER if v in problems), CLEAN)
    if verdict == NONFINITE and TORN not in problems:
        reason = f"{scan['nonfinite']:,} NaN/Inf value(s) in {scan['bad_tensor_count']} tensor(s)"
    if verdict == CLEAN:
        reason = "; ".join(check["passed"][:2])
    if entry.get("identical_to"):  # two saves of the same state: worth knowing when choosing one to resume
        reason = "; ".join(
            [*([reason] if reason else []), "identical tensors to " + ", ".join(entry["identical_to"])]
        )
    consistency = {
        "consistent": "one consistent snapshot",
        "unknown": "consistency unknown (no optimizer state or manifest to check)",
    }.get(check["verdict"], check["verdict"])
    return CheckpointInfo(
        path=entry["path"],
        relpath=entry["relpath"],
        step=step,
        step_source=source,
        verdict=verdict,
        problems=problems,
        reason=reason,
        nonfinite=scan["bad_tensors"],
        bytes=int(entry.get("bytes") or 0),
        mtime=entry.get("mtime"),
        format=entry.get("format"),
        consistency=consistency,
    )


# -- the join ------------------------------------------------------------------------------------------------


def _num(x: Any) -> float:
    """A step or value from the logs' JSON, where non-finite numbers are the strings "nan", "inf", "-inf"."""
    return float(x) if x is not None else float("nan")


def _anomalies(logs: dict[str, Any] | None) -> tuple[list[Anomaly], list[dict[str, Any]]]:
    if not logs:
        return [], []
    anomalies: list[Anomaly] = []
    stalls: list[dict[str, Any]] = []
    for f in logs["findings"]:
        if f["kind"] == "stall":
            stalls.append(f)
            continue
        if f["kind"] not in ANOMALY_KINDS or f["severity"] == "info":
            continue
        recovered = f["kind"] == "spike" and f.get("recovered_after_steps") is not None
        anomalies.append(
            Anomaly(
                f["kind"],
                f["severity"],
                f["run"],
                f["metric"],
                _num(f["step"]),
                _num(f["end_step"]),
                f["message"],
                f.get("suggestion", ""),
                recovered,
            )
        )
    anomalies.sort(key=lambda a: (a.step, a.run, a.metric))
    return anomalies, stalls


def _events(logs: dict[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    if not logs:
        return {}
    return {r["name"]: list(r.get("events", [])) for r in logs["runs"]}


def _near_steps(logs: dict[str, Any] | None, checkpoints: list[CheckpointInfo]) -> float:
    """How far back an event can explain an anomaly: as ``logs`` does, 2 % of the run (at least 50 steps),
    but never past the save interval, so a save does not explain what happens a whole interval later."""
    span = 0.0
    if logs:
        for r in logs["runs"]:
            if r.get("first_step") is not None and r.get("last_step") is not None:
                span = max(span, float(r["last_step"]) - float(r["first_step"]))
    near = max(50.0, 0.02 * span)
    steps = sorted({c.step for c in checkpoints if c.step is not None})
    if len(steps) >= 3:
        gaps = sorted(b - a for a, b in itertools.pairwise(steps))
        near = min(near, max(2.0, gaps[len(gaps) // 2] / 2))
    return near


def _group(anomalies: list[Anomaly]) -> list[list[Anomaly]]:
    groups: list[list[Anomaly]] = []
    for a in anomalies:
        if groups and a.step - groups[-1][0].step <= _GROUP_STEPS:
            groups[-1].append(a)
        else:
            groups.append([a])
    return groups


def _saves(
    events: dict[str, list[dict[str, Any]]], checkpoints: list[CheckpointInfo]
) -> list[dict[str, Any]]:
    """Checkpoint saves the logs name, plus one per checkpoint file whose step no log line mentions."""
    saves = [
        {**e, "run": run, "source": "log line"}
        for run, evs in events.items()
        for e in evs
        if e["kind"] == "checkpoint_save"
    ]
    named = {float(s["step"]) for s in saves}
    for c in checkpoints:
        if c.step is not None and float(c.step) not in named:
            saves.append(
                {
                    "kind": "checkpoint_save",
                    "step": c.step,
                    "text": c.relpath,
                    "stall_s": None,
                    "run": "",
                    "source": f"checkpoint file (step from its {c.step_source})",
                }
            )
    return sorted(saves, key=lambda s: float(s["step"]))


def _stall_near(save: dict[str, Any], stalls: list[dict[str, Any]]) -> float | None:
    if save.get("stall_s"):
        return float(save["stall_s"])
    step = float(save["step"])
    for s in stalls:
        if _num(s["step"]) - 1 <= step <= _num(s["end_step"]):
            return float(s["value"])
    return None


def _ckpt_at(step: float, checkpoints: list[CheckpointInfo]) -> CheckpointInfo | None:
    for c in checkpoints:
        if c.step is not None and float(c.step) == step:
            return c
    return None


def _first_after(step: float, checkpoints: list[CheckpointInfo]) -> CheckpointInfo | None:
    later = [c for c in checkpoints if c.step is not None and c.step >= step]
    return min(later, key=lambda c: (c.step, c.relpath)) if later else None


def _explain(
    group: list[Anomaly],
    near: float,
    saves: list[dict[str, Any]],
    stalls: list[dict[str, Any]],
    events: dict[str, list[dict[str, Any]]],
    checkpoints: list[CheckpointInfo],
) -> Conclusion:
    first = group[0]
    step = first.step
    evidence = [f"log: {a.message}" for a in group]
    before = [s for s in saves if float(s["step"]) <= step and step - float(s["step"]) <= near]
    if before:
        save = before[-1]
        save_step = float(save["step"])
        stall = _stall_near(save, stalls)
        ckpt = _ckpt_at(save_step, checkpoints)
        torn = ckpt is not None and TORN in ckpt.problems
        if stall or torn:
            evidence.append(
                f"{_fmt(step - save_step)} step(s) after the checkpoint save at step {_fmt(save_step)} "
                f"({save['source']}: {save.get('text', '')[:120]})"
            )
            if stall:
                evidence.append(f"that save stalled logging {stall:.1f} s")
            if ckpt is not None:
                evidence.append(
                    f"the checkpoint it wrote, {ckpt.relpath} "
                    f"(step {_fmt(ckpt.step)} from its {ckpt.step_source}), "
                    + (f"is torn: {ckpt.reason}" if torn else f"is {ckpt.verdict}: {ckpt.reason}")
                )
            else:
                evidence.append(f"no checkpoint file found for step {_fmt(save_step)}")
            if torn:
                return Conclusion(
                    SAVE_RACE,
                    f"the checkpoint save at step {_fmt(save_step)} raced training",
                    "high" if stall else "medium",
                    step,
                    group,
                    evidence,
                    "save a consistent snapshot without blocking the loop (copy the state, then write it "
                    "in the background: trainprobe.save.CheckpointWriter), and do not resume from the torn "
                    "checkpoint",
                    checkpoint=ckpt.path if ckpt else None,
                )
            return Conclusion(
                SAVE_STALL,
                f"the checkpoint save at step {_fmt(save_step)} stalled training",
                "medium",
                step,
                group,
                evidence,
                "take the save off the training thread (trainprobe.save.CheckpointWriter blocks only for "
                "a copy) "
                "or save to faster storage",
                checkpoint=ckpt.path if ckpt else None,
            )
    nxt = _first_after(step, checkpoints)
    if not before and nxt is not None and NONFINITE in nxt.problems:
        opt_bad = nxt.optimizer_nonfinite
        evidence.append(f"no checkpoint save within {_fmt(near)} steps before step {_fmt(step)}")
        evidence.append(
            f"the next checkpoint, {nxt.relpath} (step {_fmt(nxt.step)} from its {nxt.step_source}), "
            "holds NaN/Inf "
            + (f"in optimizer state ({len(opt_bad)}+ tensors): " if opt_bad else "in weights: ")
            + nxt.describe_nonfinite()
        )
        prev = [c for c in checkpoints if c.step is not None and c.step < step]
        if prev:
            last = max(prev, key=lambda c: c.step or 0)
            evidence.append(
                f"the checkpoint before it, {last.relpath} (step {_fmt(last.step)}), is {last.verdict}"
            )
        return Conclusion(
            EXPLOSION,
            f"a gradient explosion at step {_fmt(step)} blew up the "
            + ("optimizer state" if opt_bad else "weights"),
            "high" if opt_bad else "medium",
            step,
            group,
            evidence,
            f"inspect the batch(es) at step {_fmt(step)}, clip gradients / skip non-finite steps, and "
            "resume from "
            "the last healthy checkpoint",
            checkpoint=nxt.path,
        )
    for kind, cause, label in (
        ("resume", RESUME_CAUSE, "the resume"),
        ("lr_change", LR_CAUSE, "the learning-rate change"),
        ("custom", EVENT_CAUSE, "the logged event"),
    ):
        evs = [
            e
            for e in events.get(first.run, [])
            if e["kind"] == kind and float(e["step"]) <= step and step - float(e["step"]) <= near
        ]
        if evs:
            e = evs[-1]
            evidence.append(
                f"{_fmt(step - float(e['step']))} step(s) after {label} at step {_fmt(e['step'])}: "
                f"{e['text']}"
            )
            return Conclusion(
                cause, f"{label} at step {_fmt(e['step'])}", "medium", step, group, evidence, first.suggestion
            )
    if before:
        evidence.append(
            f"a checkpoint save at step {_fmt(before[-1]['step'])} precedes it, but it neither stalled "
            "logging "
            "nor wrote a torn checkpoint"
        )
    elif nxt is not None:
        evidence.append(f"the next checkpoint, {nxt.relpath} (step {_fmt(nxt.step)}), is {nxt.verdict}")
    else:
        evidence.append("no checkpoint at or after it to confirm the state")
    return Conclusion(
        UNKNOWN,
        f"no cause found for the {_KIND_WORD.get(first.kind, first.kind)} in {first.metric}",
        "low",
        step,
        group,
        evidence,
        first.suggestion,
    )


def _merge(conclusions: list[Conclusion]) -> list[Conclusion]:
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


def _resume_from(
    checkpoints: list[CheckpointInfo], conclusions: list[Conclusion], anomalies: list[Anomaly]
) -> tuple[CheckpointInfo | None, str]:
    lasting = [
        a
        for a in anomalies
        if a.kind in ("cliff", "non_finite", "divergence")
        or (a.kind == "spike" and a.severity == "error" and not a.recovered)
    ]
    bad_from = min((a.step for a in lasting), default=None)
    ordered = sorted(checkpoints, key=lambda c: (c.step if c.step is not None else -1, c.mtime or 0))
    healthy = [c for c in ordered if c.healthy]
    if bad_from is not None:
        healthy = [c for c in healthy if c.step is not None and c.step < bad_from]
    if not healthy:
        if not checkpoints:
            return None, "no checkpoint found in the run directory"
        return None, "no checkpoint is healthy" + (
            f" before step {_fmt(bad_from)}" if bad_from is not None else ""
        )
    best = healthy[-1]
    why = f"the latest checkpoint that is finite and {best.consistency}"
    if bad_from is not None:
        why += f", saved before the lasting anomaly at step {_fmt(bad_from)}"
    skipped = [c for c in ordered if not c.healthy and (c.step or -1) > (best.step or -1)]
    if skipped:
        why += f"; later ones are not healthy ({', '.join(f'{c.relpath}: {c.verdict}' for c in skipped[:4])})"
    return best, why


def conclude(collected: dict[str, Any], *, target: str | None = None) -> TriageReport:
    """Build the triage report from :func:`collect`'s JSON."""
    checkpoints = sorted(
        (checkpoint_info(e) for e in collected["checkpoints"]),
        key=lambda c: (c.step if c.step is not None else float("inf"), c.relpath),
    )
    logs = collected.get("logs")
    anomalies, stalls = _anomalies(logs)
    events = _events(logs)
    near = _near_steps(logs, checkpoints)
    saves = _saves(events, checkpoints)
    conclusions = _merge([_explain(g, near, saves, stalls, events, checkpoints) for g in _group(anomalies)])
    resume, why = _resume_from(checkpoints, conclusions, anomalies)
    timeline: list[TimelineItem] = []
    for run, evs in events.items():
        for e in evs:
            if e["kind"] in ("eval", "epoch"):
                continue
            text = e["text"] or e["kind"]
            if e.get("stall_s"):
                text += f" (stalled logging {e['stall_s']:.1f} s)"
            timeline.append(TimelineItem(float(e["step"]), "event", e["kind"], text, path=run))
    for s in stalls:
        timeline.append(TimelineItem(_num(s["step"]), "event", "stall", s["message"], severity=s["severity"]))
    for a in anomalies:
        timeline.append(TimelineItem(a.step, "anomaly", a.kind, a.message, severity=a.severity, path=a.run))
    for c in checkpoints:
        if c.step is not None:
            timeline.append(
                TimelineItem(float(c.step), "checkpoint", c.verdict, f"{c.relpath}: {c.verdict}", path=c.path)
            )
    order = {"event": 0, "checkpoint": 1, "anomaly": 2}
    timeline.sort(key=lambda t: (t.step, order[t.kind]))
    return TriageReport(
        run_dir=collected["run_dir"],
        target=target,
        host=collected.get("host", ""),
        log_files=list(collected.get("log_files", [])),
        logs_skipped=list(collected.get("logs_skipped", [])),
        logs=logs,
        checkpoints=checkpoints,
        timeline=timeline,
        conclusions=conclusions,
        resume_from=resume,
        resume_reason=why,
        seconds=float(collected.get("seconds", 0.0)),
        near_steps=near,
        anomalies=anomalies,
    )
