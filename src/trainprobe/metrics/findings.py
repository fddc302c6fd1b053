"""Findings: what a detector saw, where, how big, next to which event, and what to do about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainprobe.metrics.events import Event

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}

SPIKE = "spike"
CLIFF = "cliff"
STALL = "stall"
NON_FINITE = "non_finite"
MISSING = "missing_value"
DIVERGENCE = "divergence"
THROUGHPUT = "throughput_regression"
RECURRING = "recurring_spike"
OVERFITTING = "overfitting"
EARLY_EXPLOSION = "early_explosion"

FINDING_KINDS = (
    SPIKE,
    CLIFF,
    STALL,
    NON_FINITE,
    MISSING,
    DIVERGENCE,
    OVERFITTING,
    EARLY_EXPLOSION,
    THROUGHPUT,
    RECURRING,
)


@dataclass
class Finding:
    kind: str
    severity: str
    run: str
    metric: str
    step: float
    end_step: float
    value: float | None = None
    baseline: float | None = None
    magnitude: float | None = None
    recovered_after: float | None = None
    row: int = 0
    # a spike that came most of the way back but not to its baseline: the level it settled at
    settled_at: float | None = None
    event: Event | None = None
    event_distance: float | None = None
    message: str = ""
    suggestion: str = ""
    runs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "run": self.run,
            "metric": self.metric,
            "step": _num(self.step),
            "end_step": _num(self.end_step),
            "value": _num(self.value),
            "baseline": _num(self.baseline),
            "magnitude": _num(self.magnitude),
            "recovered_after_steps": _num(self.recovered_after),
            "settled_at": _num(self.settled_at),
            "event": None
            if self.event is None
            else {**self.event.to_json(), "steps_before": _num(self.event_distance)},
            "message": self.message,
            "suggestion": self.suggestion,
            "runs": list(self.runs),
        }


def _num(x: float | None) -> int | float | str | None:
    if x is None:
        return None
    x = float(x)
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return int(x) if x.is_integer() and abs(x) < 2**53 else round(x, 6)


def fmt_step(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def fmt_value(x: float | None) -> str:
    if x is None:
        return "?"
    if float(x).is_integer() and abs(x) < 1e9:
        return str(int(x))
    return f"{x:.3g}"
