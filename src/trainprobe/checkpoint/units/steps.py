"""Which step a unit holds, from every place that says so, and whether those places agree: the one place
``scan``, ``check``, ``diff`` and ``triage`` take a checkpoint's step from.

Step sources: the unit's ``name`` (``checkpoint-500``, ``global_step500``, ``step=500``) and its
``directory`` (a file inside ``step_500/``), which are labels; and what the save itself wrote:
``trainer_state.json``'s ``global_step``, every ``step field`` of the saved object (the writer's own keys, one
table: :data:`.facts.STEP_KEYS` — ``step``, ``global_step``, ``iteration``, ``iter_num``, ``num_updates``,
``epoch``, ... at the top or in a progress dict such as ``train_state`` or ``meta``; or in a JSON file beside
the weights: :data:`.sidefiles.SIDE_STEP_FIELDS`, diffusers' EMA ``optimization_step``), the ``scheduler``'s
``last_epoch``, the CheckpointWriter ``manifest`` and the ``optimizer counters`` (the per-parameter ``step``
of an optimizer's state, one source per optimizer whose counters all agree). Each is kept with what it counts
(the framework says); the unit's step is the most trustworthy source's — what the unit records before what its
name says — and :func:`judge_steps` turns agreement and disagreement into evidence:

- ``step-sources``: sources the save wrote into different files (trainer_state.json beside the optimizer, a
  step field in the model file) name different steps: torn. Two fields of one file were written at one moment
  and count different things when they differ (a note). A name or directory that disagrees with what the unit
  records is a note about labels (an epoch in the name, a renamed copy), never evidence of a tear.
- ``step-counters``: an optimizer's counters against the step the save records (never against a name). Ahead
  by two or more: torn (a live save writes the optimizer after the step was taken); exactly one ahead:
  ambiguous (a step counted from 0 looks the same); behind: a stale optimizer file (torn) where the framework
  steps the optimizer once per counted step and no grad scaler can skip steps; skipped AMP steps where a grad
  scaler is saved; no doubt where a CheckpointWriter manifest says model and optimizer were snapshotted at one
  moment; else ambiguous (micro-batches, skipped steps or an older optimizer file: unknown). A
  framework that counts its step over all its optimizers (Lightning's ``global_step`` with two optimizers)
  compares the sum of their counters, and says that convention was applied.
- ``scheduler-steps``: a scheduler that counts optimizer steps against the optimizer's counters (both count
  the steps the optimizer really took, scaler or not); skipped, with the reason, where it counts epochs.

Stdlib + numpy only (shipped with ``trainprobe.checkpoint``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.units.facts import PartFacts, counts_of_field
from trainprobe.checkpoint.units.frameworks import Framework
from trainprobe.checkpoint.units.frameworks.base import EPOCHS, OPTIMIZER_STEPS, UNKNOWN_COUNT
from trainprobe.checkpoint.units.sidefiles import side_step_fields, trainer_state_step
from trainprobe.conventions import step_in_name

_SCALER = re.compile(r"(?i)^scaler(_\d+)?\.(pt|pth|bin)$")
# Most trustworthy first: what the save wrote beats what it holds by its optimizer's counters (how often the
# optimizer stepped), and both beat a name, which is a label (an epoch, a save number, a renamed copy).
_PRIORITY = (
    "manifest",
    "trainer_state.json",
    "step field",
    "scheduler",
    "optimizer counters",
    "name",
    "directory",
)
# Sources written by the save itself: when two of them in different files disagree, the unit mixes steps.
# (The CheckpointWriter manifest has its own evidence, "manifest".)
_SAME_SAVE = ("trainer_state.json", "step field", "scheduler")
_RECORDED = ("manifest", *_SAME_SAVE)
_NAMES = ("name", "directory")
COUNTERS = "optimizer counters"
_GROUPS = "param_groups' step"  # counters kept per param group (facts._group_counters)


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
    if is_file is None:  # the unit is on this machine: its side files are beside it
        for side, key, number in side_step_fields(unit_path):
            out.append(StepSource("step field", number, _field_counts(key, counts), f"{side}: {key}", side))
    for part in facts:
        rel = "" if part.path == unit_path else os.path.relpath(part.path, unit_path)
        name = os.path.basename(part.path)
        for key, field_value in part.step_fields:
            what = _field_counts(key, counts)
            out.append(StepSource("step field", field_value, what, f"{name}: {key}", rel))
        if part.scheduler is not None:
            what = counts.get("scheduler", UNKNOWN_COUNT)
            out.append(StepSource("scheduler", part.scheduler[1], what, f"{name}: {part.scheduler[0]}", rel))
        for label, counters in part.counters.items():
            if len(counters) == 1:  # counters that disagree are check's step-counters evidence (torn)
                ((value, params),) = counters.items()
                if float(value).is_integer():
                    where = f"{name}: {label}" + (f" ({params[0]})" if _GROUPS in params[0] else "")
                    out.append(StepSource(COUNTERS, int(value), OPTIMIZER_STEPS, where, rel, len(params)))
        if part.manifest is not None:
            out.append(StepSource("manifest", part.manifest[1], OPTIMIZER_STEPS, part.manifest[0]))
    return out


def _field_counts(key: str, counts: Mapping[str, str]) -> str:
    """What a step field counts: its key's (:data:`.facts.STEP_KEYS`), the framework's word for an
    optimizer-step field."""
    what = counts_of_field(key)
    return counts.get("step field", UNKNOWN_COUNT) if what == OPTIMIZER_STEPS else what


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
    """The step the save itself records (what the optimizer counters are compared with): the manifest,
    trainer_state.json, a step field or a scheduler that counts optimizer steps. Never a name: a name is a
    label."""
    for kind in _RECORDED:
        for src in sources:
            if src.source == kind and src.counts == OPTIMIZER_STEPS:
                return src
    return None


def _origin(src: StepSource) -> str:
    """The file a source was written in (two fields of one file were written at one moment)."""
    return src.where if src.source in ("trainer_state.json", "manifest") else src.file


def judge_steps(
    sources: Sequence[StepSource], framework: Framework, *, scaler: bool = False, skipped: int = 0
) -> list[Evidence]:
    """The evidence of a unit's step sources (see the module doc); ``scaler``: the unit keeps a grad scaler;
    ``skipped``: optimizer steps the unit says were skipped."""
    out: list[Evidence] = []
    counted = [s for s in sources if s.counts == OPTIMIZER_STEPS]
    out.extend(_same_save_evidence(sources, counted))
    stated = saved_step(sources)
    stale_if_behind = framework.exact_steps and not scaler
    # Why counters behind the step are no tear, where the unit says: a grad scaler skips steps; the
    # CheckpointWriter snapshotted model and optimizer at one moment (its manifest), whatever step it got.
    behind = (
        "steps its grad scaler skipped"
        if scaler or skipped
        else "the CheckpointWriter snapshotted model and optimizer at once (its manifest), so the step it "
        "was given counts something else (micro-batches, a save without a step)"
        if any(s.source == "manifest" for s in sources)
        else None
    )
    for counter in _counters_to_compare(counted, framework, stated):
        out.append(_counters_evidence(counter, stated, stale_if_behind, skipped, behind))
    out.extend(_scheduler_evidence(sources, framework))
    label = _label_evidence(sources, counted, stated)
    if label is not None and not any(e.failed for e in out):
        out.append(label)
    recorded = [s for s in counted if s.source not in _NAMES]
    if (
        len(recorded) > 1
        and len({s.value for s in recorded}) == 1
        and not any(e.check == "step-sources" for e in out)
        and not any(e.failed for e in out)
    ):
        described = ", ".join(f"{s.where} says {s.value}" for s in recorded)
        out.append(Evidence("step-sources", "pass", f"step sources agree: {described}"))
    return out


def _same_save_evidence(sources: Sequence[StepSource], counted: Sequence[StepSource]) -> list[Evidence]:
    """Sources the save wrote into different files that share no step: torn. Fields of one file that differ
    count different things: a note."""
    same = [s for s in counted if s.source in _SAME_SAVE]
    if len({s.value for s in same}) < 2:
        return []
    described = ", ".join(f"{s.where} says {s.value}" for s in same)
    values = {"sources": [s.to_json() for s in sources]}
    by_file: dict[str, set[int]] = {}
    for s in same:
        by_file.setdefault(_origin(s), set()).add(s.value)
    if any(a.isdisjoint(b) for a, b in combinations(by_file.values(), 2)):
        message = (
            f"the files of this checkpoint name different steps: {described} — they come from different saves"
        )
        return [Evidence("step-sources", "fail", message, indicates=V.TORN, values=values)]
    message = (
        f"fields written together name different numbers ({described}): they count different things (one "
        "moment of one save cannot disagree with itself)"
    )
    return [Evidence("step-sources", "note", message, values=values)]


def _counters_to_compare(
    counted: Sequence[StepSource], framework: Framework, stated: StepSource | None
) -> list[StepSource]:
    """The optimizer counters to hold against the stated step: each optimizer's own, or, where the framework
    counts its step over all its optimizers, their sum as one source."""
    counters = [s for s in counted if s.source == COUNTERS]
    if stated is None or len(counters) < 2 or not framework.step_counts_every_optimizer:
        return counters
    total = sum(c.value for c in counters)
    file_name = counters[0].where.split(": ", 1)[0]
    labels = " + ".join(c.where.split(": ", 1)[-1] for c in counters)
    terms = " + ".join(str(c.value) for c in counters)
    where = (
        f"{file_name}: {labels} (summed, {terms} = {total}: {framework.name} counts its step over all its "
        "optimizers)"
    )
    n = sum(c.count for c in counters)
    return [StepSource(COUNTERS, total, OPTIMIZER_STEPS, where, counters[0].file, n)]


def _label_evidence(
    sources: Sequence[StepSource], counted: Sequence[StepSource], stated: StepSource | None
) -> Evidence | None:
    """What the unit's name (or folder) says against what the unit records: a note about labels, never a
    tear."""
    values = {"sources": [x.to_json() for x in sources]}
    recorded = stated or next((s for s in counted if s.source == COUNTERS), None)
    for label in (s for s in counted if s.source in _NAMES):  # a name counting saves is no step
        if recorded is None or label.value == recorded.value:
            continue
        epochs = [s for s in sources if s.source == "step field" and s.counts == EPOCHS]
        epoch = next((s for s in epochs if s.value == label.value), None)
        said = (
            f"its {label.source} ({label.where}) says {label.value} but its {recorded.source} "
            f"({recorded.where}) says {recorded.value}"
        )
        if epoch is not None or stated is not None:
            why = (
                f"the number is its epoch ({epoch.where})"
                if epoch is not None
                else "a name is a label (an epoch, a save number, a renamed copy), not what the unit holds"
            )
            return Evidence("step-sources", "note", f"{said}: {why}", values=values)
        # Not evidence of a tear, but not of one snapshot either: only the optimizer says a step, and nothing
        # inside the unit says which step the rest holds (a stale optimizer file and a relabelled copy look
        # the same).
        return Evidence(
            "step-sources",
            "skip",
            f"{said}: a name is a label (an epoch, a save number, a renamed copy), not evidence of a tear; "
            "nothing inside the unit says which step the rest of it holds",
            values={**values, "ambiguous": True},
        )
    return None


def _counters_evidence(
    counter: StepSource, stated: StepSource | None, stale_if_behind: bool, skipped: int, behind: str | None
) -> Evidence:
    """One optimizer's counters (all equal) against the step the save states."""
    label = counter.where.split(": ", 1)[-1]  # its part is the evidence's file
    n, value = counter.count, counter.value
    all_n, equal, say = (
        (f"all {n} step counters", "equal", "say") if n > 1 else ("its step counter", "equals", "says")
    )
    e = Evidence("step-counters", "pass", "", file=counter.file, values={"counter": float(value)})
    if stated is None:
        e.message = f"{label}: {all_n} {equal} ({value})"
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
            f"{label}: {all_n} {say} {value} but the checkpoint's step is {step} ({where}) — the "
            f"optimizer state was written {value - step} steps after the rest: they come from different steps"
        )
    elif value == step + 1:
        e.outcome = "skip"
        e.values["ambiguous"] = True
        e.message = (
            f"{label}: {all_n} {say} {value}, one ahead of the checkpoint's step {step} "
            f"({where}): either the {stated.source} counts from 0, or the optimizer state was written one "
            "step after the model (a tear); one file cannot tell which"
        )
    elif value < step and stale_if_behind:
        e.outcome, e.indicates = "fail", V.TORN
        e.message = (
            f"{label}: {all_n} {say} {value} but the checkpoint's step is {step} ({where}): the "
            f"optimizer state is {step - value} steps older than the rest (a stale optimizer file)"
        )
    elif value < step and behind is not None:
        e.values["decisive"] = n > 1
        e.message = (
            f"{label}: {all_n} {equal} ({value}); behind the checkpoint's step {step} ({where}): {behind}"
        )
    elif value < step:
        e.outcome = "skip"
        e.values["ambiguous"] = True
        e.message = (
            f"{label}: {all_n} {say} {value}, behind the checkpoint's step {step} ({where}): a "
            "step that counts micro-batches, skipped AMP steps (no grad scaler is saved), or an optimizer "
            "state older than the rest; nothing in the checkpoint tells which"
        )
    else:
        e.values["decisive"] = True
        e.message = f"{label}: {all_n} {equal} ({value} = the checkpoint's step {step})"
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
