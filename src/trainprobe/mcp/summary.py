"""Short text summaries of the tools' JSON documents, sized for a model's context: :class:`Summary`, the lines
several tools' summaries share, and a fleet's summary. Each tool's own summary is its module's ``summarise``
(:mod:`trainprobe.mcp.tools`).

The most important lines come first (verdict, counts, the worst findings), lists stop after a few entries
with a line saying how many were left out, and the last line names the full report's file. Nothing is cut
silently: a summary over :data:`MAX_CHARS` ends at a whole line and says how much more the report holds.

The summaries read the documents with ``.get``: the library's schemas are growing (checkpoint units, new log
readers), and a summary must still say what it can when a field moves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
MAX_CHARS = 6000
MAX_LINE = 300
_CUT_NOTE_CHARS = 120  # room kept for the line that says the summary was cut


def short(text: Any, limit: int = MAX_LINE) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def step_text(x: Any) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return "?" if x is None else str(x)


def counts_text(counts: dict[str, Any] | None) -> str:
    return ", ".join(f"{n} {what}" for what, n in (counts or {}).items() if n) or "none"


class Summary:
    """Lines of a summary; :meth:`items` lists the first few of a sequence and how many more there are."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, line: str = "") -> None:
        self.lines.append(line)

    def items(self, items: Sequence[T], render: Callable[[T], list[str]], *, limit: int, what: str) -> None:
        for item in items[:limit]:
            self.lines.extend(render(item))
        if len(items) > limit:
            self.lines.append(f"… {len(items) - limit} more {what} in the full report")

    def listed(self, items: Sequence[T], line: Callable[[T], str], *, limit: int, what: str) -> None:
        """:meth:`items` for items of one line each."""
        self.items(items, lambda item: [line(item)], limit=limit, what=what)

    def text(self, report: Path | None, report_bytes: int = 0) -> str:
        footer = "full report: not written"
        if report is not None:
            footer = f"full report (JSON, {report_bytes:,} bytes): {report}"
        budget = MAX_CHARS - len(footer) - _CUT_NOTE_CHARS
        kept: list[str] = []
        for i, line in enumerate(self.lines):
            budget -= len(line) + 1
            if budget < 0:
                rest = self.lines[i:]
                kept.append(
                    f"… summary cut here: {len(rest)} more line(s), {sum(len(x) + 1 for x in rest):,} "
                    "characters; everything is in the full report"
                )
                break
            kept.append(line)
        return "\n".join([*kept, footer])


# -- the lines several tools' summaries share ------------------------------------------------------------


def run_line(r: dict[str, Any]) -> str:
    """A log run's one line: its format, rows, steps, events and metrics."""
    steps = f"steps {step_text(r.get('first_step'))}–{step_text(r.get('last_step'))}"
    read = f"{r.get('format')}, {r.get('rows')} rows, {steps}, {len(r.get('events') or [])} event(s)"
    return f"- {r.get('name')} ({read}): {short(', '.join(r.get('metrics') or []), 160)}"


def finding_lines(f: dict[str, Any]) -> list[str]:
    """A log finding's line, and its suggestion's."""
    where = f"{f.get('run')}/{f.get('metric')} step {step_text(f.get('step'))}"
    line = f"- {f.get('severity')} {f.get('kind')} {where}"
    lines = [f"{line}: {short(f.get('message'))}"]
    if f.get("suggestion"):
        lines.append(f"    → {short(f['suggestion'], 200)}")
    return lines


def _outcome(o: dict[str, Any]) -> str:
    return (
        f"- {o.get('target')}: {o.get('status')}, exit {o.get('exit_code')}: {short(o.get('summary'), 200)}"
    )


def fleet(doc: dict[str, Any], tool: str) -> Summary:
    """A fleet's document (``probe`` and ``run`` on many targets): counts, then a line per target."""
    s = Summary()
    counts = dict(doc.get("counts") or {})
    total = counts.pop("total", len(doc.get("targets") or []))
    s.add(
        f"{tool} on {total} target(s): {counts_text(counts)} (exit code {doc.get('exit_code')}); logs: "
        f"{doc.get('log_dir')}"
    )
    s.listed(doc.get("targets") or [], _outcome, limit=20, what="targets")
    return s
