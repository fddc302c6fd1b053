"""Which step a unit holds, from every place that says so, and what each tensor of it is.

Step sources: the unit's ``name`` (``checkpoint-500``, ``global_step500``, ``step=500``), its ``directory``
(a file inside ``step_500/``), ``trainer_state.json``'s ``global_step``, a ``step field`` of the saved object
(``step``, ``global_step``, ``global_steps``, ``iteration``), the ``scheduler``'s ``last_epoch``, the
CheckpointWriter ``manifest`` (``check`` adds the ``optimizer counters``). Each is kept with what it counts
(the framework says); the unit's step is taken from the most trustworthy one, and ``check`` reports the
sources that count optimizer steps and disagree.

Tensor roles: ``weights``, ``optimizer`` or ``metadata``; non-finite values are findings only in the first
two. Stdlib + numpy only.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from trainprobe.checkpoint.base import Checkpoint, Opaque, TensorRecord
from trainprobe.checkpoint.frameworks import Framework, Role, TensorRole
from trainprobe.checkpoint.frameworks.base import OPTIMIZER_STEPS, SAVES, UNKNOWN_COUNT
from trainprobe.checkpoint.manifest import read_manifest
from trainprobe.errors import CheckpointError

# "global_step1500", "step_2000", "step=2000" (Lightning's epoch=3-step=2000), "checkpoint-2000",
# "iter_0002000"; an epoch number is not a step, and neither is any other number in a name (resnet50.pt).
NAME_STEP = re.compile(r"(?i)(?:global_step|step|iteration|iter|checkpoint|ckpt)([-_=]?)(\d+)")
_ONLY_NUMBER = re.compile(r"^(\d+)(?:\.\w+)?$")
STEP_FIELDS = ("step", "global_step", "global_steps", "iteration")
# Most trustworthy first: what the same save wrote beats what a name says.
_PRIORITY = (
    "manifest",
    "trainer_state.json",
    "step field",
    "optimizer counters",
    "scheduler",
    "name",
    "directory",
)


@dataclass(frozen=True)
class StepSource:
    """One place that states a unit's step: ``source`` (see the module doc), ``value``, what it ``counts``
    and ``where`` (the file or key)."""

    source: str
    value: int
    counts: str
    where: str

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "value": self.value, "counts": self.counts, "where": self.where}


def step_in_name(path: str) -> tuple[int, str] | None:
    """(step, separator) a checkpoint's own name states (``checkpoint-2000`` -> (2000, "-")), or None."""
    name = os.path.basename(path.rstrip("/"))
    m = NAME_STEP.search(name)
    if m:
        return int(m.group(2)), m.group(1)
    m = _ONLY_NUMBER.match(name)
    return (int(m.group(1)), "") if m else None


def fields(obj: Any) -> Any:
    return obj.fields() if isinstance(obj, Opaque) else obj


def integer(value: Any) -> int | None:
    """An int from a plain int or a one-element integral tensor; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, TensorRecord) and value.numel == 1 and value.dtype_info is not None:
        try:
            number = float(value.array().reshape(-1)[:1].astype("float64")[0])
        except (ValueError, TypeError, CheckpointError):
            return None
        return int(number) if number.is_integer() and value.dtype != "bfloat16" else None
    return None


def _step_field(objects: Any) -> tuple[str, int] | None:
    objects = fields(objects)
    if not isinstance(objects, dict):
        return None
    for key in STEP_FIELDS:
        value = integer(objects.get(key))
        if value is not None:
            return key, value
    return None


def _scheduler_epoch(objects: Any, role: Role) -> int | None:
    objects = fields(objects)
    if not isinstance(objects, dict):
        return None
    candidates: list[Any] = []
    if role == "scheduler":
        candidates.append(objects)
    for key in ("lr_schedulers", "lr_scheduler", "scheduler"):
        value = objects.get(key)
        candidates.extend(value if isinstance(value, list) else [value])
    for cand in candidates:
        cand = fields(cand)
        if isinstance(cand, dict):
            value = integer(cand.get("last_epoch"))
            if value is not None:
                return value
    return None


def collect_step_sources(
    unit_path: str, framework: Framework, opened: list[tuple[str, Role, Checkpoint]]
) -> list[StepSource]:
    """Every step source of a unit (``opened``: its parts as (path, role, checkpoint))."""
    counts = framework.counts
    out: list[StepSource] = []
    named = step_in_name(unit_path)
    if named is not None:
        # accelerate's automatic naming (checkpoint_<i>) counts saves, not steps.
        what = counts.get("name", UNKNOWN_COUNT)
        if framework.name == "accelerate" and named[1] == "_":
            what = SAVES
        out.append(StepSource("name", named[0], what, os.path.basename(unit_path.rstrip("/"))))
    if os.path.isfile(unit_path):
        in_dir = step_in_name(os.path.dirname(os.path.abspath(unit_path)))
        if in_dir is not None:
            out.append(StepSource("directory", in_dir[0], counts.get("name", UNKNOWN_COUNT), "its folder"))
    folder = unit_path if os.path.isdir(unit_path) else os.path.dirname(unit_path)
    state_path = os.path.join(folder, "trainer_state.json")
    try:
        with open(state_path, encoding="utf-8") as fh:
            value = json.load(fh).get("global_step")
        if isinstance(value, int) and not isinstance(value, bool):
            out.append(StepSource("trainer_state.json", value, OPTIMIZER_STEPS, "trainer_state.json"))
    except (OSError, ValueError, AttributeError):
        pass
    for path, role, ckpt in opened:
        # A step field of an RNG or config file counts something else (accelerate's random_states "step").
        found = _step_field(ckpt.objects) if role in ("weights", "optimizer", "state") else None
        if found is not None:
            where = f"{os.path.basename(path)}: {found[0]}"
            out.append(StepSource("step field", found[1], counts.get("step field", UNKNOWN_COUNT), where))
        epoch = _scheduler_epoch(ckpt.objects, role)
        if epoch is not None:
            where = f"{os.path.basename(path)}: last_epoch"
            out.append(StepSource("scheduler", epoch, counts.get("scheduler", UNKNOWN_COUNT), where))
        if os.path.isfile(path):
            try:
                manifest = read_manifest(path)
            except ValueError:
                manifest = None
            if manifest is not None:
                where = os.path.basename(manifest.path)
                out.append(StepSource("manifest", manifest.step, OPTIMIZER_STEPS, where))
    return out


def chosen_step(sources: list[StepSource]) -> tuple[int | None, str]:
    """The unit's step and where it comes from (the most trustworthy source that counts optimizer steps)."""
    for kind in _PRIORITY:
        for src in sources:
            if src.source == kind and src.counts == OPTIMIZER_STEPS:
                return src.value, src.source
    return None, "nothing"


# -- tensor roles ----------------------------------------------------------------------------------


def optimizer_prefixes(objects: Any, path: str = "", depth: int = 0) -> list[str]:
    """The dotted paths of every optimizer state dict (``state`` + ``param_groups``) in a skeleton."""
    objects = fields(objects)
    if depth > 6:
        return []
    if isinstance(objects, dict):
        if isinstance(objects.get("state"), dict) and isinstance(objects.get("param_groups"), list):
            return [path]
        out = []
        for key, value in objects.items():
            out.extend(optimizer_prefixes(value, f"{path}.{key}" if path else str(key), depth + 1))
        return out
    if isinstance(objects, (list, tuple)):
        out = []
        for i, value in enumerate(objects):
            out.extend(optimizer_prefixes(value, f"{path}.{i}" if path else str(i), depth + 1))
        return out
    return []


def tensor_roles(ckpt: Checkpoint, role: Role, framework: Framework) -> list[TensorRole]:
    """The role of each of ``ckpt.records``, in order."""
    if role == "weights":
        return ["weights"] * len(ckpt.records)
    if role == "optimizer":
        return ["optimizer"] * len(ckpt.records)
    if role in ("scheduler", "rng", "config", "metadata"):
        return ["metadata"] * len(ckpt.records)
    states = tuple(f"{p}.state." if p else "state." for p in optimizer_prefixes(ckpt.objects))
    top = fields(ckpt.objects)
    # A bare state dict (all tensors) holds weights only, its scalars included.
    mostly_tensors = isinstance(top, dict) and sum(
        isinstance(v, TensorRecord) for v in top.values()
    ) * 2 >= len(top)
    out: list[TensorRole] = []
    for rec in ckpt.records:
        said = framework.tensor_role(rec.name)
        if said is not None:
            out.append(said)
        elif rec.name.startswith(states) or rec.param_name is not None:
            out.append("optimizer")
        elif rec.shape == () and "." not in rec.name and not mostly_tensors:
            out.append("metadata")  # a top-level scalar beside other values: a loss, a score, a counter
        else:
            out.append("weights")
    return out
