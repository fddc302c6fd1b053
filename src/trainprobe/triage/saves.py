"""Which checkpoint unit each save in the log wrote, and where a unit's files, its name and the log disagree
about its step.

A save line names a step, a time and usually a path (``Saving checkpoint to ckpt/step_2000``, kept by
:mod:`trainprobe.metrics.events`). It is matched to a unit by that path first (the line names the unit, a file
in it, or the per-step folder a single-file unit sits in; the run dir may have moved, so the tail of the path
is enough), else by its step (check's step for the unit, or the step in the unit's name), else by time (the
unit's mtime follows the line before the next save does). A path several saves name (``last.pt``) holds the
last of them.

The step a unit holds stays ``check``'s (:func:`trainprobe.checkpoint.units.steps.chosen_step`): what the save
itself wrote (a manifest, a step field, trainer_state.json) beats a name, and a name beats a log line, which
labels the save but can name a folder that was later renamed or copied over.
"""

from __future__ import annotations

import math
from typing import Any

from trainprobe.conventions import step_json, step_text
from trainprobe.triage.model import CheckpointInfo, Disagreement, SaveMatch

_SAME_SAVE = ("manifest", "step field", "trainer_state.json", "scheduler")
_NAMES = ("name", "directory")
LOG_LINE = "log save line"
# A save is written within this long after its line (else a time match is a coincidence).
_TIME_SLACK_S = 3600.0


def _parts(path: str) -> list[str]:
    return [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]


def path_score(save_path: str, unit: CheckpointInfo) -> int:
    """How well a save line's path names a unit: 0 not at all; higher is a longer match. The unit's relpath
    inside the path with at most two names after it (a file inside the unit) scores above the folder a
    single-file unit sits in."""
    p, r = _parts(save_path), _parts(unit.relpath)
    if not r:
        return 0
    for i in range(len(p) - len(r) + 1):
        if p[i : i + len(r)] == r and len(p) - (i + len(r)) <= 2:
            return 2 * len(r) + 1
    folder = r[:-1]
    if folder and p[-len(folder) :] == folder:
        return 2 * len(folder)
    return 0


def _names_step(unit: CheckpointInfo, step: float) -> bool:
    return (unit.step is not None and float(unit.step) == step) or any(
        s["source"] in _NAMES and float(s["value"]) == step for s in unit.step_sources
    )


def match_saves(events: dict[str, list[dict[str, Any]]], units: list[CheckpointInfo]) -> list[SaveMatch]:
    """Every save the logs record, with the unit it wrote (see the module doc); sets each matched unit's
    ``saved_at``, and its step where check found none."""
    saves = sorted(
        (
            SaveMatch(
                float(e["step"]),
                e.get("text", ""),
                run,
                e.get("path"),
                e.get("wall"),
                e.get("stall_s"),
            )
            for run, evs in events.items()
            for e in evs
            if e["kind"] == "checkpoint_save" and e.get("step") is not None and not _nan(e["step"])
        ),
        key=lambda s: (s.step, s.wall or 0.0),
    )
    taken: dict[str, SaveMatch] = {}
    for save in saves:  # by path; a later save of the same path replaces an earlier one's claim
        if not save.path:
            continue
        scored = [(path_score(save.path, u), u) for u in units]
        best = max((sc for sc, _u in scored), default=0)
        if best == 0:
            continue
        tied = [u for sc, u in scored if sc == best]
        unit = next((u for u in tied if _names_step(u, save.step)), tied[0] if len(tied) == 1 else None)
        if unit is None:
            continue
        earlier = taken.get(unit.relpath)
        if earlier is not None:
            earlier.unit, earlier.matched_by = None, None
        save.unit, save.matched_by = unit.relpath, "path"
        taken[unit.relpath] = save
    for save in saves:  # by step
        if save.matched_by is None:
            unit = next((u for u in units if u.relpath not in taken and _names_step(u, save.step)), None)
            if unit is not None:
                save.unit, save.matched_by = unit.relpath, "step"
                taken[unit.relpath] = save
    walls = [s.wall for s in saves if s.wall is not None]
    for save in saves:  # by time
        if save.matched_by is not None or save.wall is None:
            continue
        until = next((w for w in walls if w > save.wall), save.wall + _TIME_SLACK_S)
        near = [
            u
            for u in units
            if u.relpath not in taken and u.mtime is not None and save.wall - 1.0 <= u.mtime <= until + 1.0
        ]
        if len(near) == 1:
            save.unit, save.matched_by = near[0].relpath, "time"
            taken[near[0].relpath] = save
    by_rel = {u.relpath: u for u in units}
    for rel, save in taken.items():
        unit = by_rel[rel]
        unit.saved_at = {"step": step_json(save.step), "run": save.run, "text": save.text,
                         "matched_by": save.matched_by}  # fmt: skip
        if unit.step is None or unit.step_source.startswith("mtime"):
            unit.step, unit.step_source = int(save.step), LOG_LINE
    return saves


def _nan(x: Any) -> bool:
    return isinstance(x, str) or (isinstance(x, float) and math.isnan(x))


def disagreements(units: list[CheckpointInfo]) -> list[Disagreement]:
    """Units whose files, name or folder, and the log's save line name different steps (optimizer counters
    are left to check's torn evidence), with the source the report trusts and why."""
    out: list[Disagreement] = []
    for u in units:
        steps: dict[str, int] = {}
        for s in u.step_sources:
            if s["source"] in _SAME_SAVE + _NAMES and s.get("counts") == "optimizer steps":
                steps.setdefault(s["source"], int(s["value"]))
        if u.saved_at is not None and u.saved_at["matched_by"] in ("path", "time"):
            steps.setdefault(LOG_LINE, int(u.saved_at["step"]))
        if len(set(steps.values())) < 2:
            continue
        trusted = u.step_source if u.step_source in steps else LOG_LINE
        others = ", ".join(f"its {k} says {v}" for k, v in steps.items() if v != u.step)
        same = [k for k in steps if k in _SAME_SAVE]
        if len({steps[k] for k in same}) > 1:
            why = "the files of one save name different steps: check calls the unit torn"
        elif trusted in _SAME_SAVE:
            why = (
                f"the {trusted} is written by the save itself; a name or a log line only labels it "
                "(a renamed or copied checkpoint, or a label counted from elsewhere)"
            )
        elif trusted in _NAMES:
            why = (
                "no step written by the save itself; its name is the unit's own label, the log's line is not"
            )
        else:
            why = "nothing in the unit states its step; the log's save line does"
        out.append(
            Disagreement(
                u.relpath,
                steps,
                trusted,
                u.step,
                f"{u.relpath}: {others}, but its {trusted} says {step_text(u.step)} — trusting the "
                f"{trusted}: {why}",
            )
        )
    return out
