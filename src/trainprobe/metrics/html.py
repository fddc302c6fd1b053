"""A self-contained HTML report: inline SVG charts (anomalies shaded, events marked) and a few lines of
our own JavaScript for a hover readout. No CDN, no external file: it opens offline."""

from __future__ import annotations

import html
import itertools
import json
import math
from typing import Any

from trainprobe.conventions import step_text
from trainprobe.metrics.analyze import LogReport
from trainprobe.metrics.events import CHECKPOINT_SAVE, RESUME
from trainprobe.metrics.findings import STALL
from trainprobe.metrics.series import downsample

_W, _H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 900, 220, 64, 16, 14, 28
_SEV_COLOR = {"error": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}
_EVENT_COLOR = {CHECKPOINT_SAVE: "#2ca02c", RESUME: "#9467bd"}

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222;max-width:980px}
h1{font-size:20px} h2{font-size:16px;margin-top:28px}
.sev{font-weight:600;text-transform:uppercase;font-size:11px;
padding:1px 6px;border-radius:3px;color:#fff} .error{background:#d62728} .warning{background:#ff7f0e}
.info{background:#1f77b4} table{border-collapse:collapse;width:100%} td,th{border-bottom:1px solid
#ddd;padding:4px 6px; text-align:left;vertical-align:top} .sugg{color:#555;font-size:12px}
svg.chart{background:#fff;border:1px
solid #ddd} .readout{font:12px monospace;color:#333;height:16px} .axis{font:10px sans-serif;fill:#555}
"""

_JS = """
(function(){
  var charts = document.querySelectorAll('svg.chart');
  charts.forEach(function(svg){
    var data = JSON.parse(svg.getAttribute('data-series'));
    var out = svg.parentNode.querySelector('.readout');
    var line = svg.querySelector('.cursor');
    svg.addEventListener('mousemove', function(ev){
      var box = svg.getBoundingClientRect();
      var x = (ev.clientX - box.left) * (svg.viewBox.baseVal.width / box.width);
      var step = data.x0 + (x - data.left) / data.w * (data.x1 - data.x0);
      var best = 0;
      for (var i = 1; i < data.s.length; i++) {
        if (Math.abs(data.s[i] - step) < Math.abs(data.s[best] - step)) { best = i; }
      }
      line.setAttribute('x1', x); line.setAttribute('x2', x);
      out.textContent = 'step ' + data.s[best] + '  ' + data.name + ' = ' + data.v[best];
    });
  });
  document.body.setAttribute('data-charts', String(charts.length));
})();
"""


def _scale(lo: float, hi: float) -> tuple[float, float]:
    if not math.isfinite(lo) or not math.isfinite(hi):
        return 0.0, 1.0
    if hi <= lo:
        return lo - 1.0, hi + 1.0
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


class _Axes:
    """The chart's plot area: data coordinates (steps, values) to SVG coordinates."""

    def __init__(self, steps: list[float], finite: list[float]) -> None:
        self.x0: float = min(steps) if steps else 0
        self.x1: float = max(steps) if steps else 1
        if self.x1 <= self.x0:
            self.x1 = self.x0 + 1
        self.y0, self.y1 = _scale(min(finite) if finite else 0.0, max(finite) if finite else 1.0)
        self.w = _W - _PAD_L - _PAD_R
        self.h = _H - _PAD_T - _PAD_B

    def sx(self, s: float) -> float:
        return _PAD_L + (s - self.x0) / (self.x1 - self.x0) * self.w

    def sy(self, v: float) -> float:
        return _PAD_T + (1 - (v - self.y0) / (self.y1 - self.y0)) * self.h


def _shades_and_marks(
    axes: _Axes, shades: list[tuple[float, float, str, str]], marks: list[tuple[float, str, str]]
) -> list[str]:
    """Anomalies as shaded spans, events as dashed lines, each with its title for a hover."""
    parts: list[str] = []
    for start, end, color, title in shades:
        if not (math.isfinite(start) and math.isfinite(end)):
            continue
        a, b = axes.sx(max(start, axes.x0)), axes.sx(min(max(end, start), axes.x1))
        parts.append(
            f'<rect class="anomaly" x="{a - 2:.1f}" y="{_PAD_T}" width="{max(b - a, 0) + 4:.1f}" '
            f'height="{axes.h}" fill="{color}" fill-opacity="0.18"><title>{html.escape(title)}</title></rect>'
        )
    for step, color, title in marks:
        if axes.x0 <= step <= axes.x1:
            x = axes.sx(step)
            parts.append(
                f'<line class="event" x1="{x:.1f}" x2="{x:.1f}" y1="{_PAD_T}" y2="{_PAD_T + axes.h}" '
                f'stroke="{color}" stroke-dasharray="4 3"><title>{html.escape(title)}</title></line>'
            )
    return parts


def _series_lines(axes: _Axes, steps: list[float], values: list[Any]) -> list[str]:
    """The series as polylines (a lone value as a point), and a red dot on top for each non-finite value."""
    parts: list[str] = []
    segments: list[list[str]] = [[]]
    previous = -math.inf
    diffs = sorted(b - a for a, b in itertools.pairwise(steps) if b > a)
    big_jump = 20 * diffs[len(diffs) // 2] if diffs else math.inf
    for s, v in zip(steps, values, strict=True):
        # Lift the pen at a non-finite value, a resume (the step went back) and a hole in the log.
        if v is None or s < previous or s - previous > big_jump:
            segments.append([])
        previous = s
        if v is not None:
            segments[-1].append(f"{axes.sx(s):.1f},{axes.sy(v):.1f}")
    for seg in segments:
        if len(seg) == 1:
            px, py = seg[0].split(",")
            parts.append(f'<circle class="point" cx="{px}" cy="{py}" r="1.5" fill="#333"/>')
        elif seg:
            parts.append(
                '<polyline class="series" fill="none" stroke="#333" stroke-width="1" '
                f'points="{" ".join(seg)}"/>'
            )
    for s, v in zip(steps, values, strict=True):
        if v is None:
            parts.append(
                f'<circle class="nonfinite" cx="{axes.sx(s):.1f}" cy="{_PAD_T + 4}" r="3" fill="#d62728"/>'
            )
    return parts


def _ticks(axes: _Axes) -> list[str]:
    ticks = []
    for k in range(5):
        v = axes.y0 + (axes.y1 - axes.y0) * k / 4
        ticks.append(
            f'<text class="axis" x="{_PAD_L - 4}" y="{axes.sy(v) + 3:.1f}" text-anchor="end">{v:.3g}</text>'
        )
        s = axes.x0 + (axes.x1 - axes.x0) * k / 4
        ticks.append(
            f'<text class="axis" x="{axes.sx(s):.1f}" y="{_H - 10}" text-anchor="middle">'
            f"{step_text(round(s))}</text>"
        )
    return ticks


def _chart(
    name: str,
    metric: str,
    series: dict[str, list[Any]],
    shades: list[tuple[float, float, str, str]],
    marks: list[tuple[float, str, str]],
) -> str:
    # A step that is no finite number (a logged ``1e999``: JSON carries it as text) has no place on an axis.
    kept = [
        (s, v)
        for s, v in zip(series["steps"], series["values"], strict=True)
        if isinstance(s, (int, float)) and math.isfinite(s)
    ]
    steps = [s for s, _ in kept]
    values = [v for _, v in kept]
    axes = _Axes(steps, [v for v in values if v is not None])
    w, h = axes.w, axes.h
    parts = _shades_and_marks(axes, shades, marks) + _series_lines(axes, steps, values)
    payload = json.dumps(
        {"name": metric, "s": steps, "v": values, "x0": axes.x0, "x1": axes.x1, "left": _PAD_L, "w": w}
    )
    return (
        f'<div class="chartbox"><h3>{html.escape(name)} · {html.escape(metric)}</h3>'
        f'<svg class="chart" viewBox="0 0 {_W} {_H}" width="100%" data-series="{html.escape(payload)}" '
        f'xmlns="http://www.w3.org/2000/svg"><rect x="{_PAD_L}" y="{_PAD_T}" width="{w}" height="{h}" '
        f'fill="none" stroke="#eee"/>{"".join(_ticks(axes))}{"".join(parts)}<line class="cursor" x1="-10" '
        f'x2="-10" y1="{_PAD_T}" '
        f'y2="{_PAD_T + h}" stroke="#999" stroke-opacity="0.6"/></svg><div class="readout"></div></div>'
    )


def render_html(report: LogReport, *, max_points: int = 1500, max_metrics: int = 8) -> str:
    rows = []
    for f in report.findings:
        rows.append(
            f'<tr><td><span class="sev {f.severity}">{f.severity}</span></td><td>{html.escape(f.run)}</td>'
            f"<td>{html.escape(f.metric)}</td><td>{step_text(f.step)}</td><td>{html.escape(f.message)}"
            f'<div class="sugg">→ {html.escape(f.suggestion)}</div></td></tr>'
        )
    charts: list[str] = []
    for run in report.runs:
        series = downsample(run, max_points)
        run_findings = [f for f in report.findings if run.name in (f.runs or [f.run])]
        flagged = {f.metric for f in run_findings}
        names = sorted(series, key=lambda m: (m not in flagged, list(run.columns).index(m)))[:max_metrics]
        events = report.events.get(run.name, [])
        marks = [
            (e.step, _EVENT_COLOR.get(e.kind, "#888"), e.describe())
            for e in events
            if e.kind not in ("eval",)
        ][:400]
        for metric in names:
            shades = [
                (f.step, f.end_step if f.end_step > f.step else f.step, _SEV_COLOR[f.severity], f.message)
                for f in run_findings
                if f.metric == metric or f.kind == STALL
            ]
            charts.append(_chart(run.name, metric, series[metric], shades, marks))
    summary = ", ".join(f"{report.count(s)} {s}" for s in ("error", "warning", "info"))
    body = (
        f"<h1>trainprobe logs</h1><p>{len(report.runs)} run(s): "
        f"{html.escape(', '.join(r.name for r in report.runs))} — {summary}.</p>"
        "<p>Shaded: anomalies (red error, orange warning, blue info). Dashed lines: events "
        "(green checkpoint save, purple resume, grey other).</p>"
        + (
            "<table><tr><th>severity</th><th>run</th><th>metric</th><th>step</th><th>what happened</th></tr>"
            + "".join(rows)
            + "</table>"
            if rows
            else "<p>No findings: the run looks healthy.</p>"
        )
        + "<h2>Charts</h2>"
        + "".join(charts)
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>trainprobe logs report</title>'
        f"<style>{_CSS}</style></head><body>{body}<script>{_JS}</script></body></html>"
    )
