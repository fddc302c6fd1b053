"""``analyze``: read logs, derive events, run the detectors, tie each finding to the event before it."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainprobe.conventions import MAX_LOGS, step_json, step_text
from trainprobe.errors import UsageError, report_verdict
from trainprobe.metrics import detectors as det
from trainprobe.metrics.context import attach_stalls, derive_events, nearest_event, suggest
from trainprobe.metrics.events import (
    CHECKPOINT_SAVE,
    RESUME,
    Event,
)
from trainprobe.metrics.findings import (
    RECURRING,
    SEVERITY_RANK,
    SPIKE,
    STALL,
    Finding,
)
from trainprobe.metrics.log_facts import log_facts
from trainprobe.metrics.reading import LogBudget, gives_series, no_rows_error, read_logs
from trainprobe.metrics.reported_nonfinite import detect_reported_nonfinite
from trainprobe.metrics.series import downsample
from trainprobe.metrics.split_files import pair_split_files
from trainprobe.metrics.step_axis import no_step_found

__all__ = [
    "SCHEMA_VERSION", "LogReport", "Options", "analyze", "analyze_json",
    "rows_to_run",
]  # fmt: skip
from trainprobe.metrics.axis import finish_run
from trainprobe.metrics.table import ColumnBuilder, RunLog
from trainprobe.metrics.user_regex import compile_user_regex
from trainprobe.metrics.walk import NotRead

SCHEMA_VERSION = 3  # the shared contract of docs/json.md (2 was skipped: one number for all)


@dataclass
class Options:
    threshold: float = 6.0
    window: int = 50
    stall_factor: float = 5.0
    stall_floor_s: float = 10.0
    near_steps: float | None = None  # default: max(50, 2 % of the run's steps)
    event_patterns: list[str] = field(default_factory=list)
    checkpoints: Path | None = None
    # ``--pattern``: a regex with named groups (``step`` and any metric) that reads each line of a text log
    # instead of the tokenizer, for a line shape it cannot read.
    pattern: str | None = None
    step: str | None = None  # ``--step KEY``: each run's step axis, instead of the one its records suggest
    max_logs: int = MAX_LOGS  # ``--max-logs N``: the log files read (0: every one), the rest said not read

    def to_json(self) -> dict[str, Any]:
        """The options as JSON (for :func:`analyze_json` on a far machine); :meth:`from_json` reads it."""
        return {
            "threshold": self.threshold,
            "window": self.window,
            "stall_factor": self.stall_factor,
            "stall_floor_s": self.stall_floor_s,
            "near_steps": self.near_steps,
            "event_patterns": list(self.event_patterns),
            "checkpoints": None if self.checkpoints is None else str(self.checkpoints),
            "pattern": self.pattern,
            "step": self.step,
            "max_logs": self.max_logs,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Options:
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            known = ", ".join(cls().to_json())
            raise UsageError(f"unknown log option {unknown[0]!r}", hint=f"known: {known}")
        values = dict(data)
        if values.get("checkpoints") is not None:
            values["checkpoints"] = Path(values["checkpoints"])
        values["event_patterns"] = list(values.get("event_patterns") or [])
        return cls(**values)


@dataclass
class LogReport:
    runs: list[RunLog]
    findings: list[Finding]
    events: dict[str, list[Event]]
    # paths under a directory read that could not be opened (trainprobe.metrics.walk): a report with any is
    # incomplete (``logs`` exits 2), never healthy
    not_read: list[NotRead] = field(default_factory=list)

    @property
    def partly_read(self) -> list[tuple[RunLog, str]]:
        """The runs whose file was read only in part, each with why: more lines of repeating numeric shapes
        missed than read as rows (trainprobe.metrics.coverage), or no column found that counts the steps. A
        report with any is never healthy."""
        out: list[tuple[RunLog, str]] = []
        for r in self.runs:
            why = r.coverage.partly_read if r.coverage is not None else None
            if why := why or no_step_found(r):
                out.append((r, why))
        return out

    @property
    def worst(self) -> str | None:
        return self.findings[0].severity if self.findings else None

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def exit_code_for(self, fail_on: str = "error") -> int:
        """0 nothing at ``fail_on`` (a severity, or "never") or worse, 1 findings, 2 when a path could not
        be read or a log was read only in part (whatever was found in the rest: an incomplete report is
        never healthy)."""
        if self.not_read or self.partly_read:
            return 2
        if fail_on == "never" or self.worst is None:
            return 0
        return 1 if SEVERITY_RANK[self.worst] <= SEVERITY_RANK[fail_on] else 0

    @property
    def exit_code(self) -> int:
        """The exit code at the default ``fail_on="error"`` (``logs`` without ``--fail-on``)."""
        return self.exit_code_for()

    def to_json(
        self, *, series: bool = False, max_points: int = 2000, data: bool = False, fail_on: str = "error"
    ) -> dict[str, Any]:
        """The ``logs --json`` document (docs/json.md), its ``verdict`` and ``exit_code`` at ``fail_on``;
        ``series``: each metric downsampled to about ``max_points`` points (the HTML's curves); ``data``: each
        run's every value too (``runs[].data``, see :meth:`RunLog.to_json`), which :meth:`from_json` needs."""
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "verdict": report_verdict(self.exit_code_for(fail_on)),
            "exit_code": self.exit_code_for(fail_on),
            "summary": {s: self.count(s) for s in SEVERITY_RANK},
            "runs": [
                {
                    "name": r.name,
                    "path": r.path,
                    "format": r.format,
                    "rows": len(r),
                    "first_step": step_json(r.steps[0]) if len(r) else None,
                    "last_step": step_json(r.steps[-1]) if len(r) else None,
                    "metrics": r.metrics,
                    "counters": [c for c in r.columns if r.role(c) == "counter"],
                    "timings": [c for c in r.columns if r.role(c) == "timing"],
                    "has_wall_clock": bool(r.wall is not None and np.isfinite(r.wall).any()),
                    "skipped_lines": r.skipped_lines,
                    "coverage": None if r.coverage is None else r.coverage.to_json(),
                    "step_axis": {"key": r.step_key, "why": r.step_why},
                    "events": [e.to_json() for e in self.events.get(r.name, [])],
                }
                for r in self.runs
            ],
            "findings": [f.to_json() for f in self.findings],
            "not_read": [n.to_json() for n in self.not_read],
            "partly_read": [{"run": r.name, "path": r.path, "why": why} for r, why in self.partly_read],
            "facts": [f.to_json() for f in log_facts(self.runs)],
        }
        if series:
            out["series"] = {r.name: downsample(r, max_points) for r in self.runs}
        if data:
            for entry, run in zip(out["runs"], self.runs, strict=True):
                entry["data"] = run.to_json()
        return out

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> LogReport:
        """The report :meth:`to_json` wrote with ``data=True`` (each run's every value), e.g. by
        :func:`analyze_json` on a far machine: the same runs, events and findings, so the terminal report,
        ``--html`` and ``--png`` are what a local analysis gives. ValueError for a document without the data
        (a plain ``logs --json`` one keeps only summaries)."""
        if document.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"schema_version {document.get('schema_version')!r}, not {SCHEMA_VERSION}")
        entries = document["runs"]
        if any("data" not in entry for entry in entries):
            raise ValueError("a run without its data: only a to_json(data=True) document rebuilds a report")
        return cls(
            runs=[RunLog.from_json(entry["data"]) for entry in entries],
            findings=[Finding.from_json(f) for f in document["findings"]],
            events={str(e["name"]): [Event.from_json(x) for x in e["events"]] for e in entries},
            not_read=[NotRead.from_json(n) for n in document.get("not_read", [])],
        )


# -- reading ------------------------------------------------------------------------------------------------
def rows_to_run(rows: Sequence[Mapping[str, float]], name: str = "run") -> RunLog:
    builder = ColumnBuilder()
    for row in rows:
        builder.add_row({k: float(v) for k, v in row.items()})
    return finish_run(builder, name=name, path="", fmt="rows")


def analyze(
    sources: Iterable[Path | str | RunLog | Sequence[Mapping[str, float]]] | Path | str | RunLog,
    *,
    options: Options | None = None,
) -> LogReport:
    """Read every source (paths, ``RunLog``s or lists of row dicts) and report what happened, when, next to
    what."""
    options = options or Options()
    if options.checkpoints is not None and not Path(options.checkpoints).is_dir():
        raise UsageError(f"--checkpoints {options.checkpoints}: not a directory")
    patterns = [compile_user_regex("--event", p) for p in options.event_patterns]
    line_pattern = _line_pattern(options.pattern)
    if isinstance(sources, (str, Path, RunLog)):
        sources = [sources]
    runs: list[RunLog] = []
    not_read: list[NotRead] = []
    budget = LogBudget(options.max_logs)
    for src in sources:
        if isinstance(src, RunLog):
            runs.append(src)
        elif isinstance(src, (str, Path)):
            runs.extend(
                read_logs(
                    Path(src),
                    event_patterns=patterns,
                    line_pattern=line_pattern,
                    not_read=not_read,
                    step=options.step,
                    budget=budget,
                )
            )
        else:
            runs.append(rows_to_run(src, name=f"run{len(runs)}"))
    if not runs or not any(gives_series(r) for r in runs):
        raise no_rows_error(runs)
    runs = pair_split_files([r for r in runs if len(r)])
    if options.step is not None and not any(r.step_key == options.step for r in runs):
        raise UsageError(
            f"--step {options.step}: no log read has a column of that name",
            hint=f"the columns of {runs[0].name}: {', '.join(list(runs[0].columns)[:12])}",
        )
    _unique_names(runs)
    findings: list[Finding] = []
    all_events: dict[str, list[Event]] = {}
    for run in runs:
        events = derive_events(run, options.checkpoints)
        all_events[run.name] = events
        run_findings = _detect(run, events, options)
        span = float(run.steps.max() - run.steps.min()) if len(run) else 0.0
        near = options.near_steps if options.near_steps is not None else max(50.0, 0.02 * span)
        for f in run_findings:
            if f.kind != STALL:
                f.event, f.event_distance = nearest_event(events, f, near)
            suggest(f, near)
        findings.extend(run_findings)
    findings.extend(_recurring(findings, runs))
    findings.sort(key=lambda f: (SEVERITY_RANK[f.severity], f.run, f.step))
    return LogReport(runs=runs, findings=findings, events=all_events, not_read=not_read)


def analyze_json(paths: Sequence[str], options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """:func:`analyze` of ``paths`` with :meth:`Options.from_json` of ``options``, as the document
    :meth:`LogReport.from_json` rebuilds the report from: what ``logs --on`` runs where the logs are (JSON in,
    JSON out)."""
    report = analyze([Path(p) for p in paths], options=Options.from_json(options or {}))
    return report.to_json(data=True)


def _detect(run: RunLog, events: list[Event], options: Options) -> list[Finding]:
    """Every detector over one run. A jump right after a save or resume is suspect by itself (a lower spike
    threshold there); a spike or cliff inside a divergence is part of it, not a finding of its own."""
    stalls = det.detect_stalls(
        run, factor=options.stall_factor, floor_s=options.stall_floor_s, window=options.window
    )
    attach_stalls(events, stalls)
    found: list[Finding] = [*stalls, *det.detect_throughput(run)]
    suspect = np.zeros(len(run), dtype=bool)
    # a step back to where the run began is a fresh start (a run appended to the file), not a resume from a
    # checkpoint: what follows is a new run's first steps, not suspect
    first_step = float(np.min(run.steps)) if len(run) else 0.0
    for e in events:
        fresh = e.kind == RESUME and e.step <= first_step
        if e.kind in (CHECKPOINT_SAVE, RESUME) and not fresh and 0 <= e.row < len(run):
            suspect[e.row : e.row + det.SUSPECT_ROWS] = True
    for metric in run.metrics:
        found.extend(det.detect_nonfinite(run, metric))
        diverging = det.detect_divergence(run, metric)
        found.extend(diverging)
        spikes = det.detect_spikes(
            run, metric, threshold=options.threshold, window=options.window, suspect=suspect
        )
        found.extend(det.outside_divergence(spikes, diverging))
        found.extend(det.detect_early_explosion(run, metric))
    found.extend(det.detect_overfitting(run))
    found.extend(det.detect_missing(run))
    found.extend(det.detect_lost_rows(run, events, found))
    found.extend(det.detect_unfinished(run))
    found.extend(detect_reported_nonfinite(run, events, found))
    return det.one_per_event(found)


def _line_pattern(pattern: str | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    compiled = compile_user_regex("--pattern", pattern)
    if not compiled.groupindex:
        raise UsageError(
            "--pattern: the regex names no group",
            hint="name the step and each metric: 'step (?P<step>\\d+) loss (?P<loss>\\S+)'",
        )
    return compiled


def _unique_names(runs: list[RunLog]) -> None:
    seen: dict[str, int] = {}
    for r in runs:
        if r.name in seen:
            seen[r.name] += 1
            r.name = f"{r.name}#{seen[r.name]}"
        else:
            seen[r.name] = 1


def _recurring(findings: list[Finding], runs: list[RunLog]) -> list[Finding]:
    if len(runs) < 2:
        return []
    spikes = [f for f in findings if f.kind == SPIKE]
    out: list[Finding] = []
    used: set[int] = set()
    for i, f in enumerate(spikes):
        if i in used:
            continue
        group = [i] + [
            j
            for j, g in enumerate(spikes)
            if j > i
            and j not in used
            and g.run != f.run
            and g.metric == f.metric
            and abs(g.step - f.step) <= 2
        ]
        run_names = sorted({spikes[j].run for j in group})
        if len(run_names) < 2:
            continue
        used.update(group)
        out.append(
            Finding(
                RECURRING,
                "warning",
                ", ".join(run_names),
                f.metric,
                f.step,
                max(spikes[j].end_step for j in group),
                magnitude=float(len(run_names)),
                runs=run_names,
                message=(
                    f"{f.metric} spikes at step {step_text(f.step)} in {len(run_names)} runs "
                    f"({', '.join(run_names)}): recurring at the same step points to the data order"
                ),
                suggestion=(
                    f"inspect the batches fed at step {step_text(f.step)} "
                    "(same seed / data order in these runs)"
                ),
            )
        )
    return out
