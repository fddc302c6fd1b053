"""The ``check`` tool: is each checkpoint one consistent snapshot (``trainprobe.tasks.check_on``;
``trainprobe.checkpoint.check.check_paths_json`` far side)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.types import CallToolResult

from trainprobe.mcp.answer import Tool, answer
from trainprobe.mcp.documents import VersionedDocument
from trainprobe.mcp.parameters import Paths, Target, Timeout
from trainprobe.mcp.summary import Summary, counts_text, short, step_text
from trainprobe.mcp.targets import LOCAL, on, place


class CheckDocument(VersionedDocument, total=False):
    """`trainprobe check --json`: a verdict per checkpoint with the evidence that decided it."""

    units: list[Any]


def check(
    paths: Paths, target: Target = LOCAL, timeout_s: Timeout = 1800
) -> Annotated[CallToolResult, CheckDocument]:
    """Is each checkpoint one consistent snapshot? A verdict per checkpoint — consistent, torn (it mixes
    optimizer steps), corrupt (damaged container), unknown (not enough evidence) or unreadable — with the
    evidence that decided it.

    Evidence: Adam step counters equal each other and the step field, exp_avg_sq >= 0, the Adam bound on
    |m|/sqrt(v), state shaped like its parameter, bf16/fp16 weights equal the cast of their fp32 master,
    zip CRC32s, DCP chunks tiling each tensor, HF index entries, the CheckpointWriter manifest; and
    NaN/Inf."""
    return answer(TOOL, lambda: document(target, paths, timeout=timeout_s), target=target)


def document(target: str, paths: list[str], *, timeout: float) -> dict[str, Any]:
    from trainprobe.tasks import check_on

    return on(place(target, "check"), check_on, paths, timeout=timeout)


def summarise(doc: dict[str, Any]) -> Summary:
    s = Summary()
    checkpoints = doc.get("units") or []
    s.add(
        f"check (exit code {doc.get('exit_code')}): {len(checkpoints)} checkpoint(s): "
        f"{counts_text(doc.get('summary'))}"
    )

    def one(c: dict[str, Any]) -> list[str]:
        step = step_text(c.get("step"))
        lines = [f"- {c.get('verdict')}: {c.get('path')} (step {step}): {short(c.get('reason'))}"]
        failed = [e for e in c.get("evidence") or [] if e.get("outcome") == "fail"]
        lines += [f"    FAIL {e.get('check')}: {short(e.get('message'), 200)}" for e in failed[:3]]
        if len(failed) > 3:
            lines.append(f"    … {len(failed) - 3} more failed check(s)")
        return lines

    from trainprobe.checkpoint.verdict import ORDER  # worst first: the library's one ranking

    def rank(c: dict[str, Any]) -> tuple[bool, int]:
        verdict = c.get("verdict")
        return not c.get("nonfinite"), ORDER.index(verdict) if verdict in ORDER else len(ORDER)

    ranked = sorted(checkpoints, key=rank)
    s.items(ranked, one, limit=10, what="checkpoints")
    return s


TOOL = Tool(check, summarise, brief="torn or corrupt checkpoints")
