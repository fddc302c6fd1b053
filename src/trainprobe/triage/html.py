"""The triage HTML report: what could not be read, the four answers, the conclusions with their evidence, the
run drawn (:mod:`.chart`: metric curves with saves, stalls and anomalies, and every unit's verdict on the same
step axis) and the units' table. One file, no external resource, a few lines of our own JavaScript for a hover
readout: it opens offline."""

from __future__ import annotations

import html

from trainprobe.conventions import step_text
from trainprobe.triage.chart import VERDICT_COLOR, run_charts
from trainprobe.triage.model import TriageReport

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222;max-width:980px}
h1{font-size:20px} h2{font-size:16px;margin-top:26px} h3{font-size:13px;margin:12px 0 2px}
table{border-collapse:collapse;width:100%} td,th{border-bottom:1px solid #ddd;padding:4px 6px;text-align:left;
vertical-align:top} .sugg{color:#555;font-size:12px} .axis{font:10px sans-serif;fill:#555}
svg.chart,svg.lane{background:#fff;border:1px solid #ddd} .problem{background:#fff4e0;border:1px solid #e9b;
padding:6px 10px;margin:4px 0} .answer ul{margin:2px 0 8px 18px;padding:0}
.triage{border:1px solid #ddd;padding:8px 14px;margin:10px 0;border-radius:4px}
.triage.high{border-left:5px solid #d62728} .triage.medium{border-left:5px solid #ff7f0e}
.triage.low{border-left:5px solid #999} .triage h3{margin:4px 0 6px;font-size:15px}
.triage ul{margin:4px 0 4px 18px;padding:0} .readout{font:12px monospace;color:#333;height:16px}
"""

# Hover: the step under the pointer, on every chart at once (they share the axis).
_JS = """
(function(){
  var svgs = document.querySelectorAll('svg.chart, svg.lane');
  var out = document.querySelector('.readout');
  svgs.forEach(function(svg){
    svg.addEventListener('mousemove', function(ev){
      var box = svg.getBoundingClientRect();
      var x = (ev.clientX - box.left) * (svg.viewBox.baseVal.width / box.width);
      var a = JSON.parse(svg.getAttribute('data-axis'));
      out.textContent = 'step ' + Math.round(a.lo + (x - a.left) / a.w * (a.hi - a.lo));
    });
  });
  document.body.setAttribute('data-charts', String(document.querySelectorAll('svg.chart').length));
})();
"""

_ANSWERS = (
    ("broken", "What is broken where"),
    ("logs", "What the logs show"),
    ("causes", "What caused what"),
    ("resume", "Where to resume"),
)


def _answers(report: TriageReport) -> str:
    esc = html.escape
    out = []
    for key, title in _ANSWERS:
        items = "".join(f"<li>{esc(line)}</li>" for line in report.answers.get(key, {}).get("lines", []))
        out.append(f'<div class="answer" data-answer="{key}"><h2>{title}</h2><ul>{items}</ul></div>')
    return "".join(out)


def _conclusions(report: TriageReport) -> str:
    esc = html.escape
    out = []
    for c in report.conclusions:
        items = "".join(f"<li>{esc(e)}</li>" for e in c.evidence)
        out.append(
            f'<div class="triage {c.confidence}" data-cause="{esc(c.cause)}"><h3>step {step_text(c.step)}: '
            f"{esc(c.title)} <small>({esc(c.confidence)} confidence)</small></h3><ul>{items}</ul>"
            f'<div class="sugg">→ {esc(c.suggestion)}</div></div>'
        )
    return "".join(out)


def _units(report: TriageReport) -> str:
    esc = html.escape
    if not report.checkpoints:
        return "<p>No checkpoint found.</p>"
    rows = []
    for c in report.checkpoints:
        color = VERDICT_COLOR.get(c.verdict, "#333")
        saved = f"; the log's save at step {step_text(c.saved_at['step'])}" if c.saved_at else ""
        rows.append(
            f'<tr class="ckpt-row"><td>{step_text(c.step)}</td><td>{esc(c.relpath)}</td>'
            f'<td style="color:{color}" class="verdict">{esc(c.verdict)}</td><td>{esc(c.reason)}'
            f'<div class="sugg">{esc(c.step_origin)}{esc(saved)}</div></td></tr>'
        )
    return (
        "<table><tr><th>step</th><th>checkpoint</th><th>verdict</th><th>evidence</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def render_triage_html(report: TriageReport) -> str:
    """The self-contained triage report."""
    esc = html.escape
    where = f" on {esc(report.target)}" if report.target else ""
    problems = "".join(f'<div class="problem">{esc(p.text())}</div>' for p in report.problems)
    charts = run_charts(report)
    body = (
        f"<h1>trainprobe triage</h1><p>{esc(report.run_dir)}{where}: <b>{esc(report.verdict)}</b> — "
        f"{len(report.anomalies)} anomaly(ies), {len(report.checkpoints)} checkpoint(s), "
        f"{len(report.log_files)} log file(s).</p>"
        + problems
        + _answers(report)
        + "<h2>Conclusions</h2>"
        + (_conclusions(report) or "<p>Nothing to explain.</p>")
        + "<h2>The run</h2><p>Curves of each metric; shaded: anomalies (red) and stalls (orange); dashed "
        "green: saves the log records. Below, on the same step axis: each checkpoint unit, coloured by its "
        "verdict (green consistent or clean, pale green unknown, orange torn, red non-finite, brown corrupt, "
        'grey unreadable).</p><div class="readout"></div>' + charts + "<h2>Checkpoints</h2>" + _units(report)
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>trainprobe triage report</title>'
        f"<style>{_CSS}</style></head><body>{body}<script>{_JS}</script></body></html>"
    )
