"""The ``triage`` tool: the whole diagnosis of one run (``trainprobe.tasks.triage_on``:
``trainprobe.triage.collect`` far side, concluded here)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.types import CallToolResult
from pydantic import Field

from trainprobe.mcp.answer import Tool, answer
from trainprobe.mcp.documents import VersionedDocument
from trainprobe.mcp.parameters import ON_TARGET, Events, Target, Threshold, Timeout
from trainprobe.mcp.summary import Summary, counts_text, short, step_text
from trainprobe.mcp.targets import LOCAL, on, place

_IDENTITY = (
    "byte-identical copies: ",
    "the same tensors (not the same bytes): ",
    "step disagreement: ",
    "frozen layers: ",
)


class TriageDocument(VersionedDocument, total=False):
    """`trainprobe triage --json`: the diagnosis of one run (its verdict, the four answers, conclusions)."""

    run_dir: str
    target: str | None
    host: str | None
    problems: list[Any]
    answers: dict[str, Any]
    resume_from: dict[str, Any] | None
    conclusions: list[Any]
    facts: list[Any]
    units: list[Any]
    saves: list[Any]
    disagreements: list[Any]
    duplicates: list[Any]
    timeline: list[Any]
    log_files: list[Any]
    logs_skipped: list[Any]
    near_steps: float | None
    seconds: float | None
    logs: dict[str, Any] | None


def triage(
    run_dir: Annotated[
        str, Field(description=f"The run's directory (its logs and checkpoints), {ON_TARGET}.")
    ],
    target: Target = LOCAL,
    threshold: Threshold = 6.0,
    stall_floor_s: Annotated[
        float, Field(ge=0, description="Shortest gap in logging that counts as a stall.")
    ] = 10.0,
    events: Events = (),
    timeout_s: Timeout = 1800,
) -> Annotated[CallToolResult, TriageDocument]:
    """The whole diagnosis of one training run in one call: what went wrong, when, why, and which checkpoint
    to resume from.

    Finds the run's logs (any format `logs` reads) and checkpoints (any format `scan` reads) under run_dir,
    runs the log detectors (spikes, cliffs, stalls, NaN), scans and checks every checkpoint (clean /
    non-finite / torn / corrupt / unreadable), joins them on one step timeline and names the likely cause of
    each anomaly with its evidence, and the last healthy checkpoint to resume from. A log it could not read is
    listed first as NOT READ."""
    return answer(
        TOOL,
        lambda: document(
            target,
            run_dir,
            threshold=threshold,
            stall_floor_s=stall_floor_s,
            events=list(events),
            timeout=timeout_s,
        ),
        target=target,
    )


def document(
    target: str, run_dir: str, *, threshold: float, stall_floor_s: float, events: list[str], timeout: float
) -> dict[str, Any]:
    from trainprobe.tasks import triage_on

    where = place(target, "triage")
    report = on(
        where, triage_on, run_dir, timeout=timeout, threshold=threshold, stall_floor_s=stall_floor_s,
        event_patterns=list(events),
    )  # fmt: skip
    report.target = where.label
    return report.to_json()


# A conclusion's lines beside its title: a summary holds every point of a run like the seed's (a dozen
# findings, the four answers) inside MAX_CHARS, so an aside is a sentence, the rest in the full report.
_ASIDE = 200
# More lines than a run's own story needs; past them the full report holds the rest (a run of 500 torn units).
_LISTED = 16


def _bullet(line: str) -> str:
    return f"- {short(line)}"


def _conclusion(c: dict[str, Any], said: set[str]) -> list[str]:
    """A conclusion's mechanism and confidence, what it could not rule out, the findings it is joined to by
    time, and its suggestion unless an earlier one gave the same (five stalled saves, one advice). Its
    evidence lines repeat what the broken and the logs answers already said, so they stay in the report."""
    lines = [
        f"- step {step_text(c.get('step'))}: " + short(f"{c.get('title')} ({c.get('confidence')} confidence)")
    ]
    if c.get("alternatives"):
        lines.append("    not ruled out: " + short("; ".join(c["alternatives"]), _ASIDE))
    for r in c.get("related") or []:
        lines.append(
            f"    joined by time, a separate finding: step {step_text(r.get('step'))} ({r.get('cause')})"
        )
    suggestion = c.get("suggestion")
    if suggestion and suggestion not in said:
        said.add(suggestion)
        lines.append(f"    → {short(suggestion, _ASIDE)}")
    return lines


def summarise(doc: dict[str, Any]) -> Summary:
    """What could not be read first, then the four answers in the order users ask them: what is broken where,
    what the logs show, what caused what (every conclusion: its mechanism, confidence and alternatives),
    where to resume (the report's ``answers``)."""
    s = Summary()
    where = f" on {doc['target']}" if doc.get("target") else ""
    checkpoints = doc.get("units") or []
    summary = doc.get("summary") or {}
    s.add(
        f"triage of {doc.get('run_dir')}{where}: {doc.get('verdict')} (exit code {doc.get('exit_code')}) — "
        f"{summary.get('anomalies', 0)} anomaly(ies) in {len(doc.get('log_files') or [])} log file(s); "
        f"{len(checkpoints)} checkpoint(s): {counts_text(summary.get('units'))}"
    )
    problems = doc.get("problems") or []
    s.listed(problems, lambda p: f"NOT READ {p.get('path')}: {short(p.get('why'))}", limit=5, what="problems")
    answers = doc.get("answers") or {}
    broken = (answers.get("broken") or {}).get("lines") or []
    identity = [line for line in broken if line.startswith(_IDENTITY)]  # duplicates, step disagreements
    s.add(f"broken: {len(broken)} line(s):")
    main = [line for line in broken if line not in identity]
    s.listed(main, _bullet, limit=_LISTED, what="lines of what is broken")
    s.listed(identity, _bullet, limit=_LISTED, what="duplicates, step disagreements and frozen layers")
    shown = (answers.get("logs") or {}).get("lines") or []
    s.add(f"the logs show {len(shown)} line(s):")
    s.listed(shown, _bullet, limit=_LISTED, what="log findings and facts")
    conclusions = doc.get("conclusions") or []
    s.add(f"causes: {len(conclusions)} conclusion(s), the live run's first, then what its saves wrote:")
    said: set[str] = set()
    s.items(conclusions, lambda c: _conclusion(c, said), limit=_LISTED, what="conclusions")
    for line in (answers.get("resume") or {}).get("lines") or ["no checkpoint to resume from"]:
        s.add(short(line, 600))
    return s


TOOL = Tool(triage, summarise, brief="the whole diagnosis of a run directory")
