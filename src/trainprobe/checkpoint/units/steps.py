"""Which step a unit holds, from every place that says so, and whether those places agree: the one place
``scan``, ``check``, ``diff`` and ``triage`` take a checkpoint's step from.

Step sources: the unit's ``name`` (``checkpoint-500``, ``global_step500``, ``step=500``), its ``directory``
(a file inside ``step_500/``), ``trainer_state.json``'s ``global_step``, a ``step field`` of the saved object
(``step``, ``global_step``, ``global_steps``, ``iteration``, at the top or in a ``train_state`` dict), the
``scheduler``'s ``last_epoch``, the CheckpointWriter ``manifest`` and the ``optimizer counters`` (the
per-parameter ``step`` of an optimizer's state, one source per optimizer whose counters all agree). Each is
kept with what it counts (the framework says); the unit's step is the most trustworthy source's, and
:func:`judge_steps` turns agreement and disagreement into evidence:

- ``step-sources``: the sources one save writes (trainer_state.json, the step field, a scheduler that steps
  per optimizer step) name different steps: torn. A name that disagrees is a note (a renamed copy?).
- ``step-counters``: an optimizer's counters against the step the save states. Ahead by two or more: torn (a
  live save writes the optimizer after the step was taken); exactly one ahead: ambiguous (a step counted from
  0 looks the same); behind: a stale optimizer file (torn) where the framework steps the optimizer once per
  counted step and no grad scaler can skip steps, else skipped AMP steps or micro-batches (no finding).
- ``scheduler-steps``: a scheduler that counts optimizer steps against the optimizer's counters (both count
  the steps the optimizer really took, scaler or not); skipped, with the reason, where it counts epochs.

Stdlib + numpy only (shipped with ``trainprobe.checkpoint``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.safe_io import read_side
from trainprobe.checkpoint.units.facts import PartFacts
from trainprobe.checkpoint.units.frameworks import Framework
from trainprobe.checkpoint.units.frameworks.base import OPTIMIZER_STEPS, UNKNOWN_COUNT
from trainprobe.conventions import step_in_name

_SCALER = re.compile(r"(?i)^scaler(_\d+)?\.(pt|pth|bin)$")
# Most trustworthy first: what the same save wrote beats what a name says; the optimizer's own counters
# come last (they say how often the optimizer stepped, which is the step only where nothing else says).
_PRIORITY = (
    "manifest",
    "trainer_state.json",
    "step field",
    "scheduler",
    "name",
    "directory",
    "optimizer counters",
)
# Sources written by the save itself: when two of them disagree, the unit mixes steps. (The CheckpointWriter
# manifest has its own evidence, "manifest".)
_SAME_SAVE = ("trainer_state.json", "step field", "scheduler")
_NAMES = ("name", "directory")
COUNTERS = "optimizer counters"


@dataclass(frozen=True)
class StepSource:
    """One place that states a unit's step: ``source`` (see the module doc), ``value``, what it ``counts``
    and ``where`` (the file or key); ``file`` is the unit's part it is in ("" for the unit itself) and
    ``count`` how many values agree on it (per-parameter counters)."""

    source: str
    value: int
    counts: str
    where: str
    file: str = ""
    count: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "value": self.value,
            "counts": self.counts,
            "where": self.where,
            "file": self.file,
            "count": self.count,
        }


# -- reading the sources ---------------------------------------------------------------------------


def trainer_state_step(unit_path: str) -> int | None:
    """``global_step`` of the ``trainer_state.json`` beside a unit's files (HF Trainer), or None."""
    folder = unit_path if os.path.isdir(unit_path) else os.path.dirname(unit_path)
    try:
        value = json.loads(read_side(os.path.join(folder, "trainer_state.json"))).get("global_step")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def collect_step_sources(
    unit_path: str,
    framework: Framework,
    facts: Sequence[PartFacts],
    *,
    trainer_state: int | None = None,
    is_file: bool | None = None,
) -> list[StepSource]:
    """Every step source of a unit from its parts' facts. ``trainer_state`` (trainer_state.json's global
    step) and ``is_file`` (the unit is one file) are read from ``unit_path`` unless given (a unit whose files
    are on other machines)."""
    counts = framework.counts
    out: list[StepSource] = []
    named = step_in_name(unit_path)
    if named is not None:
        what = framework.name_counts(named[1])
        out.append(StepSource("name", named[0], what, os.path.basename(unit_path.rstrip("/"))))
    if os.path.isfile(unit_path) if is_file is None else is_file:
        in_dir = step_in_name(os.path.dirname(os.path.abspath(unit_path)))
        if in_dir is not None:
            out.append(StepSource("directory", in_dir[0], counts.get("name", UNKNOWN_COUNT), "its folder"))
    if trainer_state is None:
        trainer_state = trainer_state_step(unit_path)
    if trainer_state is not None:
        out.append(StepSource("trainer_state.json", trainer_state, OPTIMIZER_STEPS, "trainer_state.json"))
    for part in facts:
        rel = "" if part.path == unit_path else os.path.relpath(part.path, unit_path)
        name = os.path.basename(part.path)
        if part.step_field is not None:
            what = counts.get("step field", UNKNOWN_COUNT)
            out.append(
                StepSource("step field", part.step_field[1], what, f"{name}: {part.step_field[0]}", rel)
            )
        if part.scheduler is not None:
            what = counts.get("scheduler", UNKNOWN_COUNT)
            out.append(StepSource("scheduler", part.scheduler[1], what, f"{name}: {part.scheduler[0]}", rel))
        for label, counters in part.counters.items():
            if len(counters) == 1:  # counters that disagree are check's step-counters evidence (torn)
                ((value, params),) = counters.items()
                if float(value).is_integer():
                    where = f"{name}: {label}"
                    out.append(StepSource(COUNTERS, int(value), OPTIMIZER_STEPS, where, rel, len(params)))
        if part.manifest is not None:
            out.append(StepSource("manifest", part.manifest[1], OPTIMIZER_STEPS, part.manifest[0]))
    return out


def chosen_step(sources: Sequence[StepSource]) -> tuple[int | None, str]:
    """The unit's step and where it comes from (the most trustworthy source that counts optimizer steps)."""
    for kind in _PRIORITY:
        for src in sources:
            if src.source == kind and src.counts == OPTIMIZER_STEPS:
                return src.value, src.source
    return None, "nothing"


def has_grad_scaler(part_paths: Sequence[str], facts: Sequence[PartFacts]) -> bool:
    """Whether the unit keeps a grad scaler (``scaler.pt``, Lightning's ``native_amp_scaling_state``): with
    one, optimizer steps may be skipped, so counters behind the step are no stale optimizer."""
    return any(_SCALER.match(os.path.basename(p)) for p in part_paths) or any(f.scaler for f in facts)


def skipped_steps(facts: Sequence[PartFacts]) -> int:
    """Optimizer steps the saved object says were skipped (DeepSpeed's ``skipped_steps``: fp16 overflows)."""
    return next((f.skipped_steps for f in facts if f.skipped_steps), 0)


# -- judging them ----------------------------------------------------------------------------------


def saved_step(sources: Sequence[StepSource]) -> StepSource | None:
    """The step the save itself states (what the optimizer counters are compared with): the manifest,
    trainer_state.json, the step field or a scheduler that counts optimizer steps; else the name."""
    for kind in _PRIORITY[:-1]:
        for src in sources:
            if src.source == kind and src.counts == OPTIMIZER_STEPS:
                return src
    return None


def judge_steps(
    sources: Sequence[StepSource], framework: Framework, *, scaler: bool = False, skipped: int = 0
) -> list[Evidence]:
    """The evidence of a unit's step sources (see the module doc); ``scaler``: the unit keeps a grad scaler;
    ``skipped``: optimizer steps the unit says were skipped."""
    out: list[Evidence] = []
    counted = [s for s in sources if s.counts == OPTIMIZER_STEPS]
    described = ", ".join(f"{s.where} says {s.value}" for s in counted)
    same = [s for s in counted if s.source in _SAME_SAVE]
    if len({s.value for s in same}) > 1:
        out.append(
            Evidence(
                "step-sources",
                "fail",
                f"the files of this checkpoint name different steps: {described} — they come from "
                "different saves",
                indicates=V.TORN,
                values={"sources": [s.to_json() for s in sources]},
            )
        )
    stated = saved_step(sources)
    stale_if_behind = framework.exact_steps and not scaler
    for counter in (s for s in counted if s.source == COUNTERS):
        out.append(_counters_evidence(counter, stated, stale_if_behind, skipped))
    out.extend(_scheduler_evidence(sources, framework))
    if stated is not None and not any(e.failed for e in out):
        for s in counted:
            if s.source in _NAMES and s.value != stated.value and stated.source not in _NAMES:
                out.append(
                    Evidence(
                        "step-sources",
                        "note",
                        f"its {s.source} ({s.where}) says step {s.value} but its {stated.source} says "
                        f"{stated.value}",
                        values={"sources": [x.to_json() for x in sources]},
                    )
                )
                break
    if (
        len(counted) > 1
        and len({s.value for s in counted}) == 1
        and not any(e.check == "step-sources" for e in out)
        and not any(e.failed for e in out)
    ):
        out.append(Evidence("step-sources", "pass", f"step sources agree: {described}"))
    return out


def _counters_evidence(
    counter: StepSource, stated: StepSource | None, stale_if_behind: bool, skipped: int
) -> Evidence:
    """One optimizer's counters (all equal) against the step the save states."""
    label = counter.where.split(": ", 1)[-1]  # its part is the evidence's file
    n, value = counter.count, counter.value
    e = Evidence("step-counters", "pass", "", file=counter.file, values={"counter": float(value)})
    if stated is None:
        e.message = f"{label}: all {n} step counters equal ({value})"
        e.values["decisive"] = n > 1
        return e
    step = stated.value - skipped
    where = stated.where + (f", less {skipped} skipped steps" if skipped else "")
    e.values["step"] = stated.value
    if value > step + 1:
        # The step is taken when the save starts; a live save writes optimizer state later, so a tear
        # leaves the counters *ahead* of it.
        e.outcome, e.indicates = "fail", V.TORN
        e.message = (
            f"{label}: all {n} step counters say {value} but the checkpoint's step is {step} ({where}) — the "
            f"optimizer state was written {value - step} steps after the rest: they come from different steps"
        )
    elif value == step + 1:
        e.outcome = "skip"
        e.values["ambiguous"] = True
        e.message = (
            f"{label}: all {n} step counters say {value}, one ahead of the checkpoint's step {step} "
            f"({where}): either the {stated.source} counts from 0, or the optimizer state was written one "
            "step after the model (a tear); one file cannot tell which"
        )
    elif value < step and stale_if_behind:
        e.outcome, e.indicates = "fail", V.TORN
        e.message = (
            f"{label}: all {n} step counters say {value} but the checkpoint's step is {step} ({where}): the "
            f"optimizer state is {step - value} steps older than the rest (a stale optimizer file)"
        )
    elif value < step:
        e.values["decisive"] = n > 1
        e.message = (
            f"{label}: all {n} step counters equal ({value}); behind the checkpoint's step {step} ({where}): "
            "skipped AMP steps, or a step that counts micro-batches"
        )
    else:
        e.values["decisive"] = True
        e.message = f"{label}: all {n} step counters equal ({value} = the checkpoint's step {step})"
    return e


def _scheduler_evidence(sources: Sequence[StepSource], framework: Framework) -> list[Evidence]:
    counters = [s for s in sources if s.source == COUNTERS]
    out = []
    for s in (s for s in sources if s.source == "scheduler"):
        e = Evidence("scheduler-steps", "skip", "", file=s.file, values={"scheduler": s.value})
        where = s.where.split(": ", 1)[-1] if s.file else s.where  # its part is the evidence's file
        if s.counts != OPTIMIZER_STEPS:
            e.message = (
                f"{where} {s.value}: a {framework.name} scheduler counts {s.counts} (it may step per "
                "epoch; the interval is not saved): not compared with the optimizer's step counters"
            )
        elif not counters:
            e.message = f"{where} {s.value}: no optimizer step counters to compare it with"
        elif all(c.value == s.value for c in counters):
            e.outcome, e.message = "pass", f"{where} {s.value} = the optimizer's step counters"
        else:
            off = next(c for c in counters if c.value != s.value)
            e.outcome, e.indicates = "fail", V.TORN
            e.message = (
                f"{where} says the scheduler stepped {s.value} times but {off.where}'s step counters say "
                f"{off.value}: they come from different saves"
            )
        out.append(e)
    return out
