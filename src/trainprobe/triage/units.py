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


#: check's evidence between units (:mod:`trainprobe.checkpoint.check.cross`) that triage states, by what
#: it says of the unit
_BETWEEN = {"moments-unchanged": "stale", "frozen-tensors": "frozen"}


def between_units(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What check found between this unit and an earlier one: ``stale`` (its optimizer moments are that
    unit's, bit for bit, under a later step) and ``frozen`` (tensors identical to it, no moment among them),
    each with the other unit's relpath and step and how many tensors (and moments) are the same."""
    root = entry["path"][: -len(entry["relpath"])] if entry["path"].endswith(entry["relpath"]) else ""
    out: dict[str, dict[str, Any]] = {}
    for e in entry["check"].get("evidence", []):
        said = _BETWEEN.get(e.get("check", ""))
        if said is None or e["outcome"] not in ("fail", "note"):
            continue
        v = e.get("values") or {}
        other = str(v.get("other") or "")
        out[said] = {
            "other": other[len(root) :] if root and other.startswith(root) else other,
            "other_step": v.get("other_step"),
            "shared": int(v.get("shared") or 0),
            "tensors": int(v.get("tensors") or 0),
            "moments_shared": int(v.get("moments_shared") or len(v.get("moments") or [])),
            "moments_held": int(v.get("moments_held") or 0),
        }
    return out


def torn_by(check: dict[str, Any]) -> list[str]:
    """The checks whose failed evidence says the unit is torn (``step-counters``, ``moments-vs-counter``,
    ``adam-bound``, ...), in check's order."""
    return [
        e["check"]
        for e in check.get("evidence", [])
        if e["outcome"] == "fail" and e.get("indicates") == V.TORN and e.get("check")
    ]


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
        between=between_units(entry),
        torn_by=torn_by(check),
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
