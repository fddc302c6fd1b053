"""The run as inline SVG: one panel per metric curve with saves, stalls and anomalies marked, and below them a
lane with each checkpoint unit's verdict, all on one step axis with ticks at round values (1, 2 or 5 times a
power of ten). Pure functions over the report's JSON pieces; no external resource."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

from trainprobe.conventions import step_text
from trainprobe.triage.model import TriageReport

W, LEFT, RIGHT = 900, 64, 16
PANEL_H, PAD_T, PAD_B, LANE_H = 150, 10, 22, 46
VERDICT_COLOR = {
    "clean": "#2ca02c",
    "consistent": "#2ca02c",
    "unknown": "#8fbf8f",
    "nonfinite": "#d62728",
    "torn": "#ff7f0e",
    "corrupt": "#8c564b",
    "suspicious": "#9467bd",
    "unreadable": "#7f7f7f",
}
_ANOMALY_COLOR = {"error": "#d62728", "warning": "#ff7f0e"}


def nice_ticks(lo: float, hi: float, target: int = 6) -> list[float]:
    """Ticks at round values between ``lo`` and ``hi``: multiples of 1, 2 or 5 × 10^k, about ``target`` of
    them."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    power = 10.0 ** math.floor(math.log10((hi - lo) / max(target - 1, 1)))

    def count(step: float) -> int:
        return math.floor(hi / step + 1e-9) - math.ceil(lo / step - 1e-9) + 1

    # The finest round step that gives at most one tick more than asked (and at least two ticks).
    step = next(
        (m * power for m in (1, 2, 5, 10, 20, 50) if 2 <= count(m * power) <= target + 1),
        next((m * power for m in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100) if count(m * power) >= 2), power),
    )
    first = math.ceil(lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= hi + step * 1e-9:
        value = k * step
        ticks.append(round(value, 12) if abs(value) >= 1e-12 else 0.0)
        k += 1
    return ticks


def _label(x: float) -> str:
    return step_text(x) if float(x).is_integer() else f"{x:.6g}"


class Axis:
    """The step axis shared by every panel."""

    def __init__(self, lo: float, hi: float) -> None:
        if hi <= lo:
            lo, hi = lo - 1, hi + 1
        self.lo, self.hi = lo, hi
        self.ticks = nice_ticks(lo, hi)

    def x(self, step: float) -> float:
        return LEFT + (step - self.lo) / (self.hi - self.lo) * (W - LEFT - RIGHT)


def step_range(report: TriageReport) -> tuple[float, float] | None:
    steps: list[float] = [t.step for t in report.timeline if math.isfinite(t.step)]
    for metrics in ((report.logs or {}).get("series") or {}).values():
        for s in metrics.values():
            steps.extend(float(x) for x in s["steps"] if not isinstance(x, str))
    return (min(steps), max(steps)) if steps else None


def _markers(report: TriageReport, run: str, metric: str, axis: Axis, top: float, bottom: float) -> list[str]:
    """Stalls and anomalies shaded, saves as dashed lines; each with its text as a tooltip."""
    out: list[str] = []
    findings = (report.logs or {}).get("findings") or []
    for f in findings:
        if f["kind"] != "stall" or isinstance(f["step"], str):
            continue
        a, b = axis.x(float(f["step"])), axis.x(float(f.get("end_step", f["step"])))
        out.append(
            f'<rect class="stall" x="{min(a, b) - 2:.1f}" y="{top}" width="{abs(b - a) + 4:.1f}" '
            f'height="{bottom - top}" fill="#ff7f0e" fill-opacity="0.25"><title>{html.escape(f["message"])}'
            "</title></rect>"
        )
    for an in report.anomalies:
        if an.run != run or an.metric != metric:
            continue
        a, b = axis.x(an.step), axis.x(max(an.end_step, an.step))
        out.append(
            f'<rect class="anomaly {an.kind}" x="{a - 2:.1f}" y="{top}" width="{b - a + 4:.1f}" '
            f'height="{bottom - top}" fill="{_ANOMALY_COLOR.get(an.severity, "#d62728")}" '
            'fill-opacity="0.15">'
            f"<title>{html.escape(an.message)}</title></rect>"
        )
    for s in report.saves:
        if s.run != run:
            continue
        x = axis.x(s.step)
        title = f"save at step {step_text(s.step)}: {s.text}" + (
            f" → {s.unit}" if s.unit else " (no unit on disk)"
        )
        out.append(
            f'<line class="save" x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{bottom}" stroke="#2ca02c" '
            f'stroke-dasharray="4 3"><title>{html.escape(title)}</title></line>'
        )
    return out


def _curve(steps: Sequence[Any], values: Sequence[Any], axis: Axis, top: float, bottom: float) -> list[str]:
    finite = [float(v) for v in values if v is not None and not isinstance(v, str)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if hi <= lo:
        lo, hi = lo - 1, hi + 1
    yticks = nice_ticks(lo, hi, 4)
    lo, hi = min([lo, *yticks]), max([hi, *yticks])

    def y(v: float) -> float:
        return bottom - (v - lo) / (hi - lo) * (bottom - top)

    out = [
        f'<text class="axis y" x="{LEFT - 4}" y="{y(t) + 3:.1f}" text-anchor="end">{_label(t)}</text>'
        f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#f0f0f0"/>'
        for t in yticks
    ]
    segment: list[str] = []
    segments = [segment]
    for s, v in zip(steps, values, strict=True):
        if v is None or isinstance(v, str) or isinstance(s, str):
            if isinstance(s, (int, float)):
                out.append(
                    f'<circle class="nonfinite" cx="{axis.x(float(s)):.1f}" cy="{top + 4}" r="2.5" '
                    'fill="#d62728"/>'
                )
            segment = []
            segments.append(segment)
            continue
        segment.append(f"{axis.x(float(s)):.1f},{y(float(v)):.1f}")
    for seg in segments:
        if len(seg) > 1:
            out.append(
                '<polyline class="curve" fill="none" stroke="#333" stroke-width="1" '
                f'points="{" ".join(seg)}"/>'
            )
        elif seg:
            px, py = seg[0].split(",")
            out.append(f'<circle class="point" cx="{px}" cy="{py}" r="1.5" fill="#333"/>')
    return out


def _x_ticks(axis: Axis, top: float, bottom: float) -> list[str]:
    return [
        f'<line x1="{axis.x(t):.1f}" x2="{axis.x(t):.1f}" y1="{top}" y2="{bottom}" stroke="#f0f0f0"/>'
        f'<text class="axis x" x="{axis.x(t):.1f}" y="{bottom + 14}" text-anchor="middle">{_label(t)}</text>'
        for t in axis.ticks
    ]


def _svg(kind: str, height: float, body: list[str], axis: Axis, extra: str = "") -> str:
    ticks = html.escape(json.dumps(axis.ticks))
    frame = html.escape(json.dumps({"lo": axis.lo, "hi": axis.hi, "left": LEFT, "w": W - LEFT - RIGHT}))
    return (
        f'<svg class="{kind}" viewBox="0 0 {W} {height:.0f}" width="100%" data-ticks="{ticks}" '
        f'data-axis="{frame}" {extra}'
        f'xmlns="http://www.w3.org/2000/svg">{"".join(body)}</svg>'
    )


def run_charts(report: TriageReport, *, max_metrics: int = 8) -> str:
    """Every metric curve of every run, then the checkpoint lane, on one step axis."""
    span = step_range(report)
    if span is None:
        return "<p>No step is known for any metric, save or checkpoint.</p>"
    axis = Axis(*span)
    top, bottom = PAD_T, PANEL_H - PAD_B
    panels: list[str] = []
    flagged = {(a.run, a.metric) for a in report.anomalies}
    for run, metrics in ((report.logs or {}).get("series") or {}).items():
        names = sorted(metrics, key=lambda m: (run, m) not in flagged)[:max_metrics]
        for metric in names:
            s = metrics[metric]
            body = [
                f'<rect x="{LEFT}" y="{top}" width="{W - LEFT - RIGHT}" height="{bottom - top}" '
                'fill="none" stroke="#ddd"/>'
            ]
            body += _x_ticks(axis, top, bottom)
            body += _markers(report, run, metric, axis, top, bottom)
            body += _curve(s["steps"], s["values"], axis, top, bottom)
            extra = f'data-run="{html.escape(run)}" data-metric="{html.escape(metric)}" '
            panels.append(
                f"<h3>{html.escape(run)} · {html.escape(metric)}</h3>"
                + _svg("chart", PANEL_H, body, axis, extra)
            )
    lane = [f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="18" y2="18" stroke="#999"/>',
            f'<text class="axis" x="{LEFT - 4}" y="21" text-anchor="end">units</text>']  # fmt: skip
    lane += _x_ticks(axis, 6, LANE_H - 16)
    for c in report.checkpoints:
        if c.step is None:
            continue
        title = html.escape(
            f"{c.relpath} (step {step_text(c.step)} from its {c.step_source}): {c.verdict} — {c.reason}"
        )
        lane.append(
            f'<circle class="ckpt {html.escape(c.verdict)}" data-step="{c.step}" '
            f'cx="{axis.x(c.step):.1f}" cy="18" r="6" fill="{VERDICT_COLOR.get(c.verdict, "#333")}">'
            f"<title>{title}</title></circle>"
        )
    panels.append("<h3>checkpoint units (verdict)</h3>" + _svg("lane", LANE_H, lane, axis))
    return "".join(panels)
