"""A line that says a NaN or an infinity appeared (fairseq's nan_detector, "loss is nan", vw's "NAN prediction
in example 1, forcing 0"), as a finding where no logged value showed one: the log printed a number in its
place (vw writes the forced 0), or the run stopped before the next row.

The finding is told on the metric the line names, when a word of the line and a word of a metric's name are
one word (``prediction`` and ``current predict``: one begins the other, four letters at least), else on the
run's first loss, else its first metric."""

from __future__ import annotations

import re

from trainprobe.conventions import step_text
from trainprobe.metrics.events import NONFINITE_LINE, Event
from trainprobe.metrics.findings import NON_FINITE, Finding
from trainprobe.metrics.roles import metric_kind
from trainprobe.metrics.table import RunLog

_WORD = re.compile(r"[A-Za-z]{4,}")
#: Words of such a line that name no quantity of a run (where it showed, what was done about it).
_NOT_A_NAME = frozenset(
    {
        "detected", "found", "encountered", "forcing", "replacing", "skipping", "example", "value", "values",
        "layer", "layers", "output", "outputs", "module", "tensor", "step", "iteration", "epoch", "batch",
    }
)  # fmt: skip


def detect_reported_nonfinite(run: RunLog, events: list[Event], found: list[Finding]) -> list[Finding]:
    """One finding per NaN/Inf line of ``events`` with no non-finite finding (of ``found`` or these) within a
    step of it."""
    out: list[Finding] = []
    losses = [m for m in run.metrics if metric_kind(m) == "loss"] or run.metrics
    for e in events:
        if e.kind != NONFINITE_LINE or not losses:
            continue
        if any(f.kind == NON_FINITE and abs(f.step - e.step) <= 1 for f in found + out):
            continue
        metric = named_metric(run.metrics, e.text) or losses[0]
        out.append(
            Finding(
                NON_FINITE,
                "error",
                run.name,
                metric,
                e.step,
                e.step,
                row=max(0, min(e.row, len(run) - 1)),
                message=(
                    f"the log reports a non-finite value after step {step_text(e.step)}: {clip(e.text, 160)}"
                ),
            )
        )
    return out


def named_metric(metrics: list[str], text: str) -> str | None:
    """The first of ``metrics`` a word of ``text`` names (see the module), or None."""
    words = {w.lower() for w in _WORD.findall(text)} - _NOT_A_NAME - {"nan", "infinity"}
    for metric in metrics:
        for part in _WORD.findall(metric):
            part = part.lower()
            if any(w.startswith(part) or part.startswith(w) for w in words):
                return metric
    return None


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


__all__ = ["clip", "detect_reported_nonfinite", "named_metric"]
