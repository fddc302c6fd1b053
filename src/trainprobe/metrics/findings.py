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

    @property
    def lasting(self) -> bool:
        """Whether the run stays broken after it: a cliff, a non-finite value, a divergence, or an error-level
        spike that never came back (no checkpoint saved after its start is one to resume from)."""
        return self.kind in (CLIFF, NON_FINITE, DIVERGENCE) or (
            self.kind == SPIKE and self.severity == "error" and self.recovered_after is None
        )

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

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        """The finding :meth:`to_json` wrote (its row, which orders a finding inside one analysis, is 0)."""
        event = data.get("event")
        return cls(
            str(data["kind"]),
            str(data["severity"]),
            str(data["run"]),
            str(data["metric"]),
            float(data["step"]),
            float(data["end_step"]),
            value=_float(data.get("value")),
            baseline=_float(data.get("baseline")),
            magnitude=_float(data.get("magnitude")),
            recovered_after=_float(data.get("recovered_after_steps")),
            settled_at=_float(data.get("settled_at")),
            event=None if event is None else Event.from_json(event),
            event_distance=None if event is None else _float(event.get("steps_before")),
            message=str(data.get("message", "")),
            suggestion=str(data.get("suggestion", "")),
            runs=[str(r) for r in data.get("runs", [])],
        )


def _float(x: float | str | None) -> float | None:
    """A number as :func:`_num` wrote it ("nan", "inf" and "-inf" as strings) back to a float."""
    return None if x is None else float(x)


def _num(x: float | None) -> int | float | str | None:
    if x is None:
        return None
    x = float(x)
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return int(x) if x.is_integer() and abs(x) < 2**53 else round(x, 6)


def fmt_value(x: float | None) -> str:
    if x is None:
        return "?"
    if float(x).is_integer() and abs(x) < 1e9:
        return str(int(x))
    return f"{x:.3g}"
