"""The checkpoint units of a triage, from what :func:`~trainprobe.triage.collect.collect` gathered: each with
``check``'s verdict, step and step sources (the one answer every command gives), and the duplicates among
them."""

from __future__ import annotations

from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.triage.model import CheckpointInfo, Duplicate


def step_groups(check: dict[str, Any]) -> dict[str, int]:
    """A torn unit's optimizer steps and how many tensors each holds (check's step-counters evidence)."""
    for e in check.get("evidence", []):
        if e["outcome"] == "fail" and e.get("indicates") == V.TORN and e["values"].get("counters"):
            return {str(k): int(v) for k, v in e["values"]["counters"].items()}
    return {}


def checkpoint_info(entry: dict[str, Any]) -> CheckpointInfo:
    """One unit as ``check`` judged it; a step check could not find is the unit's mtime on the log's wall
    clock (a save line that names the unit replaces it later: :mod:`trainprobe.triage.saves`)."""
    check = entry["check"]
    step, source = check.get("step"), check.get("step_source") or "nothing"
    if step is None and entry.get("step_at_mtime"):
        m = entry["step_at_mtime"]
        step, source = int(m["step"]), f"mtime on the wall clock of log '{m['run']}'"
    return CheckpointInfo(
        path=entry["path"],
        relpath=entry["relpath"],
        step=step,
        step_source=source,
        verdict=check["verdict"],
        reason=check.get("reason") or "",
        nonfinite=list(check.get("nonfinite") or []),
        framework=check.get("framework") or "file",
        format=check.get("format"),
        bytes=int(entry.get("bytes") or 0),
        mtime=entry.get("mtime"),
        step_sources=list(check.get("step_sources") or []),
        step_groups=step_groups(check),
        findings=sorted(
            {
                e["indicates"]
                for e in check.get("evidence", [])
                if e["outcome"] == "fail" and e.get("indicates")
            },
            key=lambda v: (V.ORDER.index(v) if v in V.ORDER else len(V.ORDER), v),
        ),
        nonfinite_tensors=int(check.get("nonfinite_tensor_count") or 0),
        nonfinite_values=int(check.get("nonfinite_values") or 0),
        identical_to=list(entry.get("identical_to") or []),
        byte_identical_to=list(entry.get("byte_identical_to") or []),
    )


def duplicates(units: list[CheckpointInfo]) -> list[Duplicate]:
    """Groups of units with the same tensors, each group once, in step order."""
    by_rel = {u.relpath: u for u in units}
    seen: set[str] = set()
    out: list[Duplicate] = []
    for u in units:
        if not u.identical_to or u.relpath in seen:
            continue
        group = [u, *(by_rel[r] for r in u.identical_to if r in by_rel)]
        seen.update(g.relpath for g in group)
        same_bytes = all(g.relpath in u.byte_identical_to for g in group[1:])
        out.append(Duplicate([g.relpath for g in group], same_bytes, [g.step for g in group]))
    return out
