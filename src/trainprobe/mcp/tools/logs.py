"""The ``logs`` tool: findings in training logs (``trainprobe.tasks.logs_on``;
``trainprobe.metrics.analyze.analyze_json`` far side)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.types import CallToolResult
from pydantic import Field

from trainprobe.errors import UsageError
from trainprobe.mcp.answer import Tool, answer
from trainprobe.mcp.documents import VersionedDocument
from trainprobe.mcp.parameters import ON_TARGET, Events, Target, Threshold, Timeout
from trainprobe.mcp.summary import Summary, counts_text, finding_lines, run_line, short
from trainprobe.mcp.targets import LOCAL, on, place


class LogsDocument(VersionedDocument, total=False):
    """`trainprobe logs --json`: the runs read and their findings, most severe first, and the log's own
    facts."""

    runs: list[Any]
    findings: list[Any]
    not_read: list[Any]
    partly_read: list[Any]
    facts: list[Any]


def logs(
    paths: Annotated[
        list[str],
        Field(
            min_length=1,
            description=f"Log files or directories {ON_TARGET}; the format is detected by content.",
        ),
    ],
    target: Target = LOCAL,
    threshold: Threshold = 6.0,
    window: Annotated[
        int, Field(ge=5, description="Rows in the trailing window of the median/MAD baselines.")
    ] = 50,
    stall_factor: Annotated[
        float, Field(gt=0, description="A stall is a gap >= this x the usual one...")
    ] = 5.0,
    stall_floor_s: Annotated[float, Field(ge=0, description="...and at least this many seconds.")] = 10.0,
    events: Events = (),
    checkpoints: Annotated[
        str | None,
        Field(description=f"A checkpoint directory {ON_TARGET}: its files' names/mtimes are save events."),
    ] = None,
    timeout_s: Timeout = 900,
) -> Annotated[CallToolResult, LogsDocument]:
    """Find loss spikes, accuracy cliffs, stalls, NaN/Inf and missing values in training logs, each tied to
    the event before it (a checkpoint save, a resume, an LR change), with a suggested next step.

    Reads JSONL, CSV/TSV, W&B exports, Lightning metrics.csv, HF trainer_state.json, TensorBoard event files
    and plain-text logs (llm.c, Megatron, Python logging, `step 10 | loss 2.3`, key=value ...)."""
    options = {
        "threshold": threshold,
        "window": window,
        "stall_factor": stall_factor,
        "stall_floor_s": stall_floor_s,
        "event_patterns": list(events),
        "checkpoints": checkpoints,
    }
    return answer(TOOL, lambda: document(target, paths, timeout=timeout_s, **options), target=target)


def document(target: str, paths: list[str], *, timeout: float, **options: Any) -> dict[str, Any]:
    """``logs --json``'s document; ``options`` are :class:`trainprobe.metrics.Options` fields (``threshold``,
    ``window``, ``stall_factor``, ``stall_floor_s``, ``event_patterns``, ``checkpoints``), checked as the CLI
    checks its flags."""
    from trainprobe.metrics import Options
    from trainprobe.tasks import logs_on

    if options.get("window", 50) < 5:
        raise UsageError("--window must be at least 5")
    where = place(target, "logs")
    return on(where, logs_on, paths, options=Options.from_json(options), timeout=timeout).to_json()


def summarise(doc: dict[str, Any]) -> Summary:
    s = Summary()
    runs = doc.get("runs") or []
    findings = doc.get("findings") or []
    s.add(f"logs: {len(findings)} finding(s) ({counts_text(doc.get('summary'))}) in {len(runs)} run(s)")
    s.listed(runs, run_line, limit=5, what="runs")
    s.listed(doc.get("facts") or [], lambda f: f"- fact: {short(f.get('text'))}", limit=5, what="facts")
    if findings:
        s.add("findings, most severe first:")
    s.items(findings, finding_lines, limit=10, what="findings")
    return s


TOOL = Tool(logs, summarise, brief="training logs")
