"""The triage HTML report: the conclusions, a checkpoint timeline, and below them the logs report that
``trainprobe logs --html`` draws (rebuilt from the logs' JSON, so it works for a remote triage too). One
file, no external resources."""

from __future__ import annotations

import html
from typing import Any

from trainprobe.metrics import Event, Finding, LogReport, RunLog
from trainprobe.metrics.analyze import rows_to_run
from trainprobe.metrics.html import render_html
from trainprobe.triage.model import TriageReport
from trainprobe.triage.model import fmt as _fmt

CLEAN, NONFINITE, TORN, CORRUPT, UNREADABLE = "clean", "nonfinite", "torn", "corrupt", "unreadable"

_VERDICT_COLOR = {
    CLEAN: "#2ca02c",
    NONFINITE: "#d62728",
    TORN: "#ff7f0e",
    CORRUPT: "#8c564b",
    UNREADABLE: "#7f7f7f",
}
_CSS = """
.triage{border:1px solid #ddd;padding:8px 14px;margin:10px 0;border-radius:4px}
.triage.high{border-left:5px solid #d62728} .triage.medium{border-left:5px solid #ff7f0e}
.triage.low{border-left:5px solid #999} .triage h3{margin:4px 0 6px;font-size:15px}
.triage ul{margin:4px 0 4px 18px;padding:0} .resume{background:#eef7ee;border:1px solid #9c9;padding:8px 12px}
.resume.none{background:#fbeaea;border-color:#d99}
.verdict{font-weight:600} svg.timeline{background:#fff;border:1px solid #ddd}
"""


def _f(x: Any) -> float:
    return float(x) if x is not None else float("nan")


def log_report_from_json(doc: dict[str, Any]) -> LogReport:
    """A LogReport good enough to draw: runs rebuilt from the (downsampled) series, findings and events."""
    runs: list[RunLog] = []
    events: dict[str, list[Event]] = {}
    series = doc.get("series", {})
    for r in doc["runs"]:
        rows: dict[float, dict[str, float]] = {}
        for metric, s in series.get(r["name"], {}).items():
            for step, value in zip(s["steps"], s["values"], strict=True):
                row = rows.setdefault(float(step), {"step": float(step)})
                row[metric] = float("nan") if value is None else float(value)
        run = rows_to_run([rows[k] for k in sorted(rows)], name=r["name"])
        run.path, run.format = r.get("path", ""), r.get("format", "")
        runs.append(run)
        events[r["name"]] = [
            Event(
                e["kind"],
                _f(e["step"]),
                0,
                text=e.get("text", ""),
                wall=e.get("wall"),
                stall_s=e.get("stall_s"),
            )
            for e in r.get("events", [])
        ]
    findings = []
    for f in doc["findings"]:
        ev = f.get("event")
        findings.append(
            Finding(
                f["kind"],
                f["severity"],
                f["run"],
                f["metric"],
                _f(f["step"]),
                _f(f["end_step"]),
                value=None if f.get("value") is None else _f(f["value"]),
                baseline=None if f.get("baseline") is None else _f(f["baseline"]),
                event=None
                if ev is None
                else Event(ev["kind"], _f(ev["step"]), 0, text=ev.get("text", ""), stall_s=ev.get("stall_s")),
                message=f["message"],
                suggestion=f.get("suggestion", ""),
                runs=list(f.get("runs", [])),
            )
        )
    return LogReport(runs=runs, findings=findings, events=events)


def _timeline_svg(report: TriageReport) -> str:
    """Steps left to right: checkpoints as dots coloured by verdict, anomalies as red ticks, saves and stalls
    as dashed lines."""
    steps = [t.step for t in report.timeline if t.step == t.step]
    if not steps:
        return "<p>No step is known for any checkpoint or event.</p>"
    x0, x1 = min(steps), max(steps)
    if x1 <= x0:
        x1 = x0 + 1
    w, h, left, right = 900, 120, 40, 20

    def sx(s: float) -> float:
        return left + (s - x0) / (x1 - x0) * (w - left - right)

    parts = [f'<line x1="{left}" x2="{w - right}" y1="60" y2="60" stroke="#999"/>']
    for t in report.timeline:
        x = sx(t.step)
        title = html.escape(f"step {_fmt(t.step)}: {t.text}")
        if t.kind == "checkpoint":
            color = _VERDICT_COLOR.get(t.type, "#333")
            parts.append(
                f'<circle class="ckpt {html.escape(t.type)}" cx="{x:.1f}" cy="60" r="6" fill="{color}">'
                f"<title>{title}</title></circle>"
            )
        elif t.kind == "anomaly":
            parts.append(
                f'<line class="anomaly" x1="{x:.1f}" x2="{x:.1f}" y1="20" y2="48" stroke="#d62728" '
                f'stroke-width="3"><title>{title}</title></line>'
            )
        elif t.type in ("checkpoint_save", "stall", "resume", "lr_change"):
            color = {"stall": "#ff7f0e", "resume": "#9467bd", "lr_change": "#1f77b4"}.get(t.type, "#2ca02c")
            parts.append(
                f'<line class="event {t.type}" x1="{x:.1f}" x2="{x:.1f}" y1="70" y2="100" stroke="{color}" '
                f'stroke-dasharray="3 2"><title>{title}</title></line>'
            )
    for k in range(5):
        s = x0 + (x1 - x0) * k / 4
        parts.append(
            f'<text class="axis" x="{sx(s):.1f}" y="116" text-anchor="middle">{_fmt(round(s))}</text>'
        )
    return (
        f'<svg class="timeline" viewBox="0 0 {w} {h}" width="100%" xmlns="http://www.w3.org/2000/svg">'
        + "".join(parts)
        + "</svg>"
    )


def _section(report: TriageReport) -> str:
    esc = html.escape
    where = f" on {esc(report.target)}" if report.target else ""
    out = [
        f"<h1>trainprobe triage</h1><p>{esc(report.run_dir)}{where}: "
        f'<span class="verdict">{esc(report.verdict)}</span> — {len(report.anomalies)} anomaly(ies), '
        f"{len(report.checkpoints)} checkpoint(s), {len(report.log_files)} log file(s).</p>"
    ]
    if report.resume_from is not None:
        out.append(
            f'<p class="resume">Resume from <b>{esc(report.resume_from.relpath)}</b> (step '
            f"{_fmt(report.resume_from.step)}): {esc(report.resume_reason)}.</p>"
        )
    else:
        out.append(f'<p class="resume none">No checkpoint to resume from: {esc(report.resume_reason)}.</p>')
    out.append("<h2>Conclusions</h2>")
    if not report.conclusions:
        out.append("<p>No anomalies in the logs.</p>")
    for c in report.conclusions:
        items = "".join(f"<li>{esc(e)}</li>" for e in c.evidence)
        out.append(
            f'<div class="triage {c.confidence}" data-cause="{esc(c.cause)}"><h3>step {_fmt(c.step)}: '
            f"{esc(c.title)} <small>({esc(c.confidence)} confidence)</small></h3><ul>{items}</ul>"
            f'<div class="sugg">→ {esc(c.suggestion)}</div></div>'
        )
    out.append(
        "<h2>Timeline</h2><p>Dots: checkpoints (green clean, orange torn, red non-finite, brown corrupt, "
        "grey unreadable). Red ticks: anomalies. Dashed: saves (green), stalls (orange), resumes, LR changes."
        "</p>" + _timeline_svg(report)
    )
    rows = []
    for ck in report.checkpoints:
        color = _VERDICT_COLOR.get(ck.verdict, "#333")
        rows.append(
            f'<tr class="ckpt-row"><td>{_fmt(ck.step)}</td><td>{esc(ck.relpath)}</td>'
            f'<td style="color:{color}" class="verdict">{esc(ck.verdict)}</td><td>{esc(ck.reason)}'
            f'<div class="sugg">step from its {esc(ck.step_source)}</div></td></tr>'
        )
    out.append(
        "<h2>Checkpoints</h2><table><tr><th>step</th><th>checkpoint</th><th>verdict</th><th>evidence</th></tr>"
        + "".join(rows)
        + "</table>"
        if rows
        else "<h2>Checkpoints</h2><p>No checkpoints found.</p>"
    )
    out.append("<h2>Logs</h2>")
    return "".join(out)


def render_triage_html(report: TriageReport) -> str:
    """The self-contained triage report: conclusions, checkpoint timeline, then the logs report's findings and
    charts."""
    logs = report.logs or {"runs": [], "findings": []}
    page = render_html(log_report_from_json(logs))
    body_start = page.index("<body>") + len("<body>")
    logs_body = page[body_start:].replace("<h1>trainprobe logs</h1>", "", 1)
    if not report.logs:
        logs_body = (
            "<p>No training log found in the run directory.</p>" + logs_body[logs_body.index("<h2>Charts") :]
        )
    head = page[:body_start].replace(
        "<title>trainprobe logs report</title>", "<title>trainprobe triage report</title>"
    )
    head = head.replace("</style>", _CSS + "</style>", 1)
    return head + _section(report) + logs_body
