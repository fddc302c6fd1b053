"""The ``diff`` tool: what changed between two checkpoints (``trainprobe.tasks.diff_on``;
``trainprobe.checkpoint.diff.diff_paths_json`` far side)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.types import CallToolResult
from pydantic import Field

from trainprobe.mcp.answer import Tool, answer
from trainprobe.mcp.documents import VersionedDocument
from trainprobe.mcp.parameters import ON_TARGET, Target, Timeout
from trainprobe.mcp.summary import Summary, counts_text, short, step_text
from trainprobe.mcp.targets import LOCAL, on, place


class DiffDocument(VersionedDocument, total=False):
    """`trainprobe diff --json`: what changed between checkpoints a and b, tensor by tensor."""

    a: str
    b: str
    notes: list[Any]
    units: dict[str, Any]
    not_compared: dict[str, Any]
    optimizer_steps: dict[str, Any]
    same_run: dict[str, Any]
    modules: list[Any]
    top_modules: list[Any]
    tensors: list[Any]


def diff(
    a: Annotated[str, Field(description=f"The reference checkpoint, {ON_TARGET}.")],
    b: Annotated[str, Field(description=f"The checkpoint compared with a, {ON_TARGET}.")],
    target: Target = LOCAL,
    timeout_s: Timeout = 1800,
) -> Annotated[CallToolResult, DiffDocument]:
    """What changed between two checkpoints, tensor by tensor, without torch: identical, changed (relative
    change ||A-B||/||A|| and max |A-B|), added, removed, shape or dtype changed; per module; and for two
    checkpoints of one run, parameters that did not move and parameters whose optimizer step moved while
    their weights did not (or the reverse) — what a save that mixed steps leaves behind."""
    return answer(TOOL, lambda: document(target, a, b, timeout=timeout_s), target=target)


def document(target: str, a: str, b: str, *, timeout: float) -> dict[str, Any]:
    from trainprobe.tasks import diff_on

    return on(place(target, "diff"), diff_on, a, b, timeout=timeout)


def summarise(doc: dict[str, Any]) -> Summary:
    s = Summary()
    tensors = doc.get("tensors") or []
    s.add(f"diff (exit code {doc.get('exit_code')}): A {doc.get('a')} → B {doc.get('b')}")
    s.add(f"{len(tensors)} tensor(s): {counts_text(doc.get('summary'))}")
    steps = doc.get("optimizer_steps") or {}
    if steps.get("a") is not None or steps.get("b") is not None:
        s.add(f"optimizer step {step_text(steps.get('a'))} → {step_text(steps.get('b'))}")
    same = doc.get("same_run") or {}
    for key, what in (
        ("step_moved_weights_did_not", "optimizer stepped, weights identical"),
        ("weights_moved_step_did_not", "weights moved, optimizer step did not"),
    ):
        found = same.get(key) or []
        for line in found[:5]:
            s.add(f"- {what}: {short(line)}")
    if same.get("frozen_count"):
        listed = ", ".join(same.get("frozen_parameters") or [])
        s.add(f"{same['frozen_count']} parameter(s) did not move at all: {short(listed)}")
    changed = sorted(
        (
            t
            for t in tensors
            if t.get("status") == "changed" and isinstance(t.get("rel_change"), (int, float))
        ),
        key=lambda t: -float(t["rel_change"]),
    )
    if changed:
        s.add("largest relative changes (||A-B||/||A||):")
    s.listed(
        changed,
        lambda t: f"- {t.get('name')}: {t['rel_change']:.3g} (max |A-B| {t.get('max_abs_diff')})",
        limit=10,
        what="changed tensors",
    )
    other = [t for t in tensors if t.get("status") not in ("changed", "identical")]
    s.listed(
        other, lambda t: f"- {t.get('status')}: {t.get('name')}", limit=10, what="added/removed/reshaped"
    )
    return s


TOOL = Tool(diff, summarise, brief="two checkpoints")
