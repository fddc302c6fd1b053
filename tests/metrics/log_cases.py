"""Scoring a real log against its ``expected.json``: the one rule shared by the test of the tuned corpus
(tests/metrics/test_real_logs.py) and the benchmark that scores both parts (benchmarks/logs_quality.py).

The corpus has two parts: ``tests/data/real-logs/`` (tuned: readers and detectors are changed while looking at
it, and the test suite asserts it case by case) and ``tests/data/real-logs-held-out/`` (held out: drawn at
random when each case was added, see its SPLIT.md; only the benchmark reads it, so its figure says how the
readers do on logs nobody tuned them on).

Matching rules:

- **series**: an expected ``(split, key)`` is found when some run has a column (a metric, counter or timing)
  whose split
  (:func:`trainprobe.metrics.splits.split_of`) is ``split`` and whose name is ``key`` after normalisation:
  case, and runs of spaces, ``_`` and ``-`` are ignored, and a leading ``eval/`` or ``train/`` that the
  reader adds to the fields of a line labelled with its split is dropped (``Test set: Average loss: 0.03`` →
  column ``eval/Average loss``), on both sides.
  The rows where it was logged must span exactly ``steps`` (lowest and highest step: a log of pasted
  snippets or resumes is not in step order), hold at least ``count_min`` values, and start/end at
  ``first``/``last`` in file order (relative tolerance 1e-3) when those are given.
- **not_metrics**: no run reports a metric with one of these names (same normalisation, the ``eval/`` and
  ``train/`` prefixes dropped only in text logs, where only the reader adds them); a run may keep
  such a column as a counter or a timing (``RunLog.roles``), which the detectors do not watch.
- **healthy**: no finding of severity warning or error, and no run read only in part
  (``LogReport.partly_read``: such a report is never healthy, its exit code is 2). A log read right that says
  it was read in part is a false alarm; a log read wrong that says so is honest, not misread-but-healthy.
- **anomalies**: each is matched by a finding of any severity whose kind corresponds (spike → spike or
  recurring spike; nan → non_finite or missing_value; missing → missing_value; stall → stall, any metric;
  slowdown → throughput_regression; overfitting, divergence, cliff, early-explosion → the same kind), on a
  metric matching ``key`` (not for stalls), at a step within ``tolerance`` of ``step`` (for a finding that
  spans steps, anywhere from its start to its end).

A case with no expected series (a run that crashed before its first metric) is read right when ``analyze``
raises "no metric rows found" (or reports no metric), and that answer counts as its ``missing`` anomalies.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainprobe.errors import TrainprobeError
from trainprobe.metrics import LogReport, analyze
from trainprobe.metrics.splits import EVAL_PREFIX, split_of

DATA = Path(__file__).parents[1] / "data"
TUNED = DATA / "real-logs"
HELD_OUT = DATA / "real-logs-held-out"


def cases_in(corpus: Path) -> list[Path]:
    return sorted(p.parent for p in corpus.glob("*/expected.json"))


KINDS = {
    "spike": {"spike", "recurring_spike"},
    "cliff": {"cliff"},
    "stall": {"stall"},
    "nan": {"non_finite", "missing_value"},
    "missing": {"missing_value"},
    "divergence": {"divergence"},
    "overfitting": {"overfitting"},
    "early-explosion": {"early_explosion"},
    "slowdown": {"throughput_regression"},
}


def norm(name: str) -> str:
    name = name.strip()
    for prefix in (EVAL_PREFIX, "train/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return re.sub(r"[\s_\-]+", "_", name.lower())


def norm_strict(name: str) -> str:
    return re.sub(r"[\s_\-]+", "_", name.strip().lower())


@dataclass
class Score:
    case: str
    problems: list[str] = field(default_factory=list)  # reading: series, steps, values, not_metrics
    anomalies: int = 0
    found: int = 0
    false_warnings: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    healthy_expected: bool = False
    # the report raised no warning or error: what a user reads as "healthy"
    reported_healthy: bool = False

    @property
    def read_right(self) -> bool:
        return not self.problems

    @property
    def misread_but_healthy(self) -> bool:
        """Read wrong, yet reported healthy: the worst answer a diagnosis tool can give."""
        return not self.read_right and self.reported_healthy

    @property
    def ok(self) -> bool:
        return not (self.problems or self.false_warnings or self.missed)


def _close(got: float, want: float) -> bool:
    if got != got or want != want:
        return got != got and want != want
    return abs(got - want) <= 1e-3 * max(abs(want), 1e-12) or got == want


def _check_series(report: LogReport, want: dict[str, Any], score: Score) -> None:
    split, key = want["split"], want["key"]
    candidates = [
        (run, name)
        for run in report.runs
        for name in run.columns
        if norm(name) == norm(key) and split_of(name) == split
    ]
    if not candidates:
        names = sorted({n for r in report.runs for n in r.columns})
        score.problems.append(f"series ({split}, {key}) not found; columns: {names[:30]}")
        return
    errors: list[str] = []
    for run, name in candidates:
        rows = run.mask(name)
        steps = run.steps[rows]
        values = run.columns[name][rows]
        why = []
        if steps.size < want.get("count_min", 1):
            why.append(f"{steps.size} values < count_min {want.get('count_min')}")
        if steps.size and [float(steps.min()), float(steps.max())] != [float(s) for s in want["steps"]]:
            why.append(f"steps {float(steps.min()):g}..{float(steps.max()):g}, want {want['steps']}")
        if steps.size and "first" in want and not _close(float(values[0]), float(want["first"])):
            why.append(f"first {values[0]!r}, want {want['first']}")
        if steps.size and "last" in want and not _close(float(values[-1]), float(want["last"])):
            why.append(f"last {values[-1]!r}, want {want['last']}")
        if not why:
            return
        errors.append(f"{run.name}:{name}: " + "; ".join(why))
    score.problems.append(f"series ({split}, {key}): " + " | ".join(errors))


def _matches(finding: Any, want: dict[str, Any]) -> bool:
    if finding.kind not in KINDS.get(want["kind"], {want["kind"]}):
        return False
    if want["kind"] != "stall" and norm(finding.metric) != norm(want["key"]):
        return False
    tol = float(want.get("tolerance", 0))
    lo, hi = min(finding.step, finding.end_step), max(finding.step, finding.end_step)
    return lo - tol <= float(want["step"]) <= hi + tol


def score_case(case: Path) -> Score:
    expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    score = Score(
        case.name, anomalies=len(expected.get("anomalies", [])), healthy_expected=bool(expected["healthy"])
    )
    try:
        report = analyze([case / p for p in expected["inputs"]])
    except TrainprobeError as exc:
        if not expected.get("series") and "no metric rows" in str(exc):
            # a log with no metrics at all: the error is the right answer, and it says "missing"
            score.found = sum(a["kind"] == "missing" for a in expected.get("anomalies", []))
            score.missed = [
                f"{a['kind']} {a['key']}" for a in expected.get("anomalies", []) if a["kind"] != "missing"
            ]
            return score
        score.problems.append(f"not read: {exc}")
        score.missed = [f"{a['kind']} {a['key']} @ {a['step']}" for a in expected.get("anomalies", [])]
        return score
    if not expected.get("series") and not any(r.metrics for r in report.runs):
        score.found = sum(a["kind"] == "missing" for a in expected.get("anomalies", []))
    for want in expected.get("series", []):
        _check_series(report, want, score)
    # A prefix is the reader's own only in text logs; elsewhere (``train/lr``) it is part of the name.
    columns = {norm(n) if r.format == "text" else norm_strict(n) for r in report.runs for n in r.metrics}
    for name in expected.get("not_metrics") or []:
        if norm(name) in columns or norm_strict(name) in columns:
            score.problems.append(f"{name!r} is not a metric, but came out as one")
    for want in expected.get("anomalies", []):
        if any(_matches(f, want) for f in report.findings):
            score.found += 1
        else:
            score.missed.append(f"{want['kind']} {want['key']} @ {want['step']}")
    partly = [f"partly read: {why}" for _run, why in report.partly_read]
    score.reported_healthy = not partly and not any(
        f.severity in ("warning", "error") for f in report.findings
    )
    if expected["healthy"]:
        score.false_warnings = [
            f"{f.severity}: {f.message}" for f in report.findings if f.severity in ("warning", "error")
        ]
        if score.read_right:  # a log read right that says it was read in part: a false alarm too
            score.false_warnings += partly
    return score
