"""The ``watch_tail`` tool: the latest findings of a growing log (``trainprobe.tasks.tail.tail_on``;
``trainprobe.metrics.follow.tail_findings`` far side)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.types import CallToolResult
from pydantic import Field

from trainprobe.mcp.answer import Tool, answer
from trainprobe.mcp.parameters import ON_TARGET, Events, Target, Threshold, Timeout
from trainprobe.mcp.summary import Summary, counts_text, finding_lines, short, step_text
from trainprobe.mcp.targets import LOCAL, on, place
from trainprobe.mcp.tools.logs import LogsDocument


class WatchTailDocument(LogsDocument, total=False):
    """The summary document `trainprobe watch --json` ends with, and `tail`: the bytes read."""

    tail: dict[str, Any]


def watch_tail(
    path: Annotated[str, Field(description=f"One growing text or JSONL training log {ON_TARGET}.")],
    target: Target = LOCAL,
    lines: Annotated[
        int, Field(ge=2, le=1_000_000, description="How many of the log's last lines to read.")
    ] = 5000,
    since_step: Annotated[
        float | None, Field(description="Only findings after this step (the last step you saw) when given.")
    ] = None,
    threshold: Threshold = 6.0,
    events: Events = (),
    timeout_s: Timeout = 120,
) -> Annotated[CallToolResult, WatchTailDocument]:
    """The latest findings of a (growing) training log: reads only the log's last lines where it is — cheap
    on a 500 MB log — and runs the detectors `watch` runs (spikes, cliffs, stalls, NaN/Inf). Call it again
    with since_step set to the last step you saw to get only what is new."""
    options = {
        "lines": lines,
        "since_step": since_step,
        "threshold": threshold,
        "event_patterns": list(events),
    }
    return answer(
        TOOL,
        lambda: document(target, path, timeout=timeout_s, **options),
        target=target,
    )


def document(target: str, path: str, *, timeout: float, **options: Any) -> dict[str, Any]:
    """:func:`trainprobe.tasks.tail.tail_on`'s document; ``options`` are its ``lines``, ``since_step``,
    ``threshold`` and ``event_patterns``."""
    from trainprobe.tasks.tail import tail_on

    return on(place(target, "watch_tail"), tail_on, path, timeout=timeout, **options)


def summarise(doc: dict[str, Any]) -> Summary:
    s = Summary()
    tail = doc.get("tail") or {}
    findings = sorted(doc.get("findings") or [], key=lambda f: -_number(f.get("step")))
    since = tail.get("since_step")
    s.add(
        f"watch_tail {tail.get('path')}: last {tail.get('lines')} line(s), bytes "
        f"{tail.get('from_byte', 0):,}–{tail.get('file_bytes', 0):,} of {tail.get('file_bytes', 0):,}, "
        f"{tail.get('rows')} metric row(s); "
        f"{len(findings)} finding(s) ({counts_text(doc.get('summary'))})"
        + (
            f" after step {step_text(since)} ({tail.get('findings_before_since_step')} earlier left out)"
            if since is not None
            else ""
        )
    )
    for run in (doc.get("runs") or [])[:1]:
        metrics = short(", ".join(run.get("metrics") or []), 200)
        s.add(
            f"steps {step_text(run.get('first_step'))}–{step_text(run.get('last_step'))}; metrics: {metrics}"
        )
    if findings:
        s.add("latest first:")
    s.items(findings, finding_lines, limit=10, what="findings")
    return s


def _number(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) else float("-inf")


TOOL = Tool(
    watch_tail,
    summarise,
    brief="the latest findings of a growing log",
    document_help="the summary document `trainprobe watch --json` ends with, plus `tail` (the bytes read)",
)
