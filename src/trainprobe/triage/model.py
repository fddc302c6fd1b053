"""What a triage report holds: its checkpoint units, the saves the log names, anomalies, conclusions, the
timeline, and the report itself with its JSON form (``triage --json``, schema in docs/triage.md).

A unit's verdict, step and step source are ``check``'s (:mod:`trainprobe.checkpoint.verdict`,
:mod:`trainprobe.checkpoint.units.steps`): triage never decides them a second time. The exit code is the one
rule of :func:`trainprobe.checkpoint.verdict.exit_code` over the units, with a log that could not be read
counted as unreadable and an anomaly in the logs as a finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.conventions import step_json
from trainprobe.errors import report_verdict
from trainprobe.metrics.findings import CLIFF, DIVERGENCE, MISSING, NON_FINITE, SPIKE, Finding
from trainprobe.metrics.log_facts import LogFact

SCHEMA_VERSION = 3  # the shared contract of docs/json.md
# The logs' findings triage explains (a stall is evidence, not an anomaly; the rest are about throughput or
# fitting, not a broken run).
ANOMALY_KINDS = (SPIKE, CLIFF, NON_FINITE, DIVERGENCE, MISSING)
SAVE_RACE, SAVE_STALL, EXPLOSION, RESUME_CAUSE, LR_CAUSE, EVENT_CAUSE, METRIC_PIPELINE, UNKNOWN = (
    "save-race",
    "save-stall",
    "gradient-explosion",
    "resume",
    "lr-change",
    "event",
    "metric-pipeline",
    "unknown",
)
#: a torn unit whose moments are a fresh optimizer's under later counters: a finding of its own, as a tear
OPTIMIZER_RESET = "optimizer-reset"
#: the findings about what a save wrote (never the cause of the live run's anomalies)
UNIT_CAUSES = (SAVE_RACE, OPTIMIZER_RESET)
KIND_WORD = {NON_FINITE: "NaN/Inf", MISSING: "missing value"}


def anomaly_json(finding: Finding) -> dict[str, Any]:
    """An anomaly as the triage document lists it: the finding's place and message, and whether a spike
    came back."""
    return {
        "kind": finding.kind,
        "severity": finding.severity,
        "run": finding.run,
        "metric": finding.metric,
        "step": step_json(finding.step),
        "end_step": step_json(finding.end_step),
        "message": finding.message,
        "recovered": finding.kind == SPIKE and finding.recovered_after is not None,
    }


@dataclass
class CheckpointInfo:
    """One checkpoint unit. ``verdict``, ``reason``, ``step`` and ``step_source`` are ``check``'s; where check
    finds no step, ``step`` is the log's (the save line that names the unit) or the unit's mtime on the log's
    wall clock, and ``step_source`` says so. ``step_groups``: a torn unit's optimizer steps and how many
    tensors hold each."""

    path: str
    relpath: str
    step: int | None
    step_source: str
    verdict: str
    reason: str
    nonfinite: list[dict[str, Any]]
    framework: str = "file"
    format: str | None = None
    bytes: int = 0
    mtime: float | None = None
    step_sources: list[dict[str, Any]] = field(default_factory=list)
    step_groups: dict[str, int] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)  # what check's failed evidence indicates (torn, ...)
    nonfinite_tensors: int = 0
    nonfinite_values: int = 0
    identical_to: list[str] = field(default_factory=list)
    byte_identical_to: list[str] = field(default_factory=list)
    saved_at: dict[str, Any] | None = None  # the log's save that names this unit (see SaveMatch)
    # check's evidence against an earlier unit: "stale" / "frozen" -> the other unit and the counts
    between: dict[str, dict[str, Any]] = field(default_factory=dict)
    torn_by: list[str] = field(default_factory=list)  # the checks that found it torn

    @property
    def step_origin(self) -> str:
        """Where the step came from, as the reports print it."""
        return f"step from its {self.step_source}" if self.step is not None else "no step found"

    @property
    def healthy(self) -> bool:
        """Read, finite and not torn: the verdicts with exit code 0."""
        return V.exit_code([self.verdict]) == 0

    @property
    def torn(self) -> bool:
        return V.TORN in self.findings

    @property
    def has_nonfinite(self) -> bool:
        return V.NONFINITE in self.findings or self.nonfinite_tensors > 0

    @property
    def optimizer_nonfinite(self) -> list[dict[str, Any]]:
        return [t for t in self.nonfinite if t.get("optimizer_state")]

    def describe_nonfinite(self, limit: int = 3) -> str:
        parts = []
        for t in sorted(self.nonfinite, key=lambda t: not t.get("optimizer_state"))[:limit]:
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
            "framework": self.framework,
            "format": self.format,
            "step": self.step,
            "step_source": self.step_source,
            "step_sources": self.step_sources,
            "verdict": self.verdict,
            "reason": self.reason,
            "findings": self.findings,
            "step_groups": self.step_groups,
            "nonfinite_tensors": self.nonfinite,
            "nonfinite_tensor_count": self.nonfinite_tensors,
            "nonfinite_values": self.nonfinite_values,
            "identical_to": self.identical_to,
            "byte_identical_to": self.byte_identical_to,
            "saved_at": self.saved_at,
            "between": self.between,
            "torn_by": self.torn_by,
            "bytes": self.bytes,
            "mtime": self.mtime,
        }


@dataclass
class SaveMatch:
    """A save the log names (its step, wall time, the path its line names) and the unit it wrote: matched by
    ``path`` (the line names the unit or a file in it), else by ``step``, else by ``time`` (the unit's mtime
    right after the line); ``unit`` None when no unit on disk is that save."""

    step: float
    text: str
    run: str
    path: str | None
    wall: float | None
    stall_s: float | None
    unit: str | None = None
    matched_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": step_json(self.step),
            "text": self.text,
            "run": self.run,
            "path": self.path,
            "wall": self.wall,
            "stall_s": self.stall_s,
            "unit": self.unit,
            "matched_by": self.matched_by,
        }


@dataclass
class Disagreement:
    """A unit whose step sources (its files, its name or folder, the log's save line) name different steps;
    ``trusted`` is the source whose step the report (and ``check``) takes, ``why`` says why."""

    unit: str
    steps: dict[str, int]
    trusted: str
    step: int | None
    why: str

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "steps": self.steps,
            "trusted": self.trusted,
            "step": self.step,
            "why": self.why,
        }


@dataclass
class Duplicate:
    """Units that hold the same tensors (by ``check``'s fingerprint); ``bytes``: the same bytes too."""

    units: list[str]
    bytes: bool
    steps: list[int | None]

    def to_json(self) -> dict[str, Any]:
        return {"units": self.units, "bytes": self.bytes, "steps": self.steps}


@dataclass
class Conclusion:
    """One finding of what caused what: the mechanism its evidence supports (``title``), for an anomaly of
    the logs (or a few at the same steps) or for a torn unit (no anomalies). ``confidence`` comes from the
    rule of its cause (:mod:`trainprobe.triage.rules`), which ``confidence_rule`` states; ``alternatives``
    are the explanations the evidence could not rule out; ``related``: the other findings it is joined to by
    time (never merged into it). ``evidence`` ends with the confidence rule and the alternatives, as the
    terminal prints them."""

    cause: str
    title: str
    confidence: str
    step: float
    anomalies: list[Finding]
    evidence: list[str]
    suggestion: str
    checkpoint: str | None = None
    confidence_rule: str = ""
    alternatives: list[str] = field(default_factory=list)
    related: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "title": self.title,
            "confidence": self.confidence,
            "confidence_rule": self.confidence_rule,
            "step": step_json(self.step),
            "anomalies": [anomaly_json(a) for a in self.anomalies],
            "evidence": self.evidence,
            "alternatives": self.alternatives,
            "related": self.related,
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
            "step": step_json(self.step),
            "kind": self.kind,
            "type": self.type,
            "text": self.text,
            "severity": self.severity,
            "path": self.path,
        }


@dataclass
class Problem:
    """Something triage could not read (a log, a checkpoint unit): listed first, never taken as healthy."""

    kind: str  # log-not-read | log-partly-read | unit-not-read
    path: str
    why: str

    def text(self) -> str:
        what = "partly read" if self.kind == "log-partly-read" else "not read"
        return f"{self.path}: {what} — {self.why}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "why": self.why, "text": self.text()}


@dataclass
class TriageReport:
    """One run directory triaged: what was read (and what not), what the units and logs say, the causes
    found, the unit to resume from, and the four ``answers`` drawn from all of it."""

    run_dir: str
    target: str | None
    host: str
    log_files: list[str]
    logs_skipped: list[dict[str, str]]
    logs: dict[str, Any] | None
    problems: list[Problem]
    checkpoints: list[CheckpointInfo]
    saves: list[SaveMatch]
    disagreements: list[Disagreement]
    duplicates: list[Duplicate]
    anomalies: list[Finding]
    conclusions: list[Conclusion]
    timeline: list[TimelineItem]
    resume_from: CheckpointInfo | None
    resume_reason: str
    near_steps: float
    seconds: float
    answers: dict[str, Any] = field(default_factory=dict)
    facts: list[LogFact] = field(default_factory=list)  # the log's own facts (trainprobe.metrics.log_facts)

    @property
    def exit_code(self) -> int:
        """1 for an anomaly or a finding in a unit; else 2 when a log or a unit could not be read; else 0."""
        if self.anomalies:
            return 1
        unread: list[str] = [
            V.UNREADABLE for p in self.problems if p.kind in ("log-not-read", "log-partly-read")
        ]
        return V.exit_code([c.verdict for c in self.checkpoints] + unread)

    @property
    def verdict(self) -> str:
        return report_verdict(self.exit_code)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "run_dir": self.run_dir,
            "target": self.target,
            "host": self.host,
            "problems": [p.to_json() for p in self.problems],
            "answers": self.answers,
            "summary": {
                "anomalies": len(self.anomalies),
                "units": V.counts(c.verdict for c in self.checkpoints),
                "causes": [c.cause for c in self.conclusions],
                "duplicates": len(self.duplicates),
                "disagreements": len(self.disagreements),
                "facts": len(self.facts),
            },
            "resume_from": None
            if self.resume_from is None
            else {
                "path": self.resume_from.path,
                "relpath": self.resume_from.relpath,
                "step": self.resume_from.step,
                "why": self.resume_reason,
            },
            "conclusions": [c.to_json() for c in self.conclusions],
            "units": [c.to_json() for c in self.checkpoints],
            "saves": [s.to_json() for s in self.saves],
            "disagreements": [d.to_json() for d in self.disagreements],
            "duplicates": [d.to_json() for d in self.duplicates],
            "facts": [f.to_json() for f in self.facts],
            "timeline": [t.to_json() for t in self.timeline],
            "log_files": self.log_files,
            "logs_skipped": self.logs_skipped,
            "near_steps": step_json(self.near_steps),
            "seconds": self.seconds,
            "logs": self.logs,
        }
