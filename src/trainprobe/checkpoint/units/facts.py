"""What one part of a unit says about the unit's identity, read from its skeleton where the part is
(:class:`PartFacts`): its step field, scheduler, optimizer counters, manifest, grad scaler, the framework
that knows its object and what the framework itself wants to know. :mod:`.steps` makes the unit's step
sources of them.

Stdlib + numpy only (shipped with ``trainprobe.checkpoint``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from trainprobe.checkpoint.reading.base import Checkpoint, TensorRecord
from trainprobe.checkpoint.reading.skeleton import (
    fields_of,
    find_optimizer_states,
    find_optimizers,
    label_of,
    scalar,
)
from trainprobe.checkpoint.units.frameworks import FRAMEWORKS, Framework, Role
from trainprobe.checkpoint.units.frameworks.base import EPOCHS, OPTIMIZER_STEPS
from trainprobe.checkpoint.units.manifest import read_manifest
from trainprobe.checkpoint.units.rates import optimizer_rates, rates_of
from trainprobe.errors import CheckpointError

#: The step-like fields writers record in the saved object, under their own names, and what each counts: one
#: table (a writer's new key is one line). A framework's ``counts["step field"]`` says what its optimizer-step
#: fields count where it knows better; an epoch field counts epochs everywhere.
STEP_KEYS: dict[str, str] = {
    "step": OPTIMIZER_STEPS,
    "global_step": OPTIMIZER_STEPS,
    "global_steps": OPTIMIZER_STEPS,  # DeepSpeed
    "iteration": OPTIMIZER_STEPS,  # Megatron
    "iter_num": OPTIMIZER_STEPS,  # nanoGPT-style loops
    "iter": OPTIMIZER_STEPS,  # mmengine's meta
    "iters": OPTIMIZER_STEPS,
    "cur_iter": OPTIMIZER_STEPS,
    "num_updates": OPTIMIZER_STEPS,  # fairseq
    "num_steps": OPTIMIZER_STEPS,
    "total_steps": OPTIMIZER_STEPS,
    "train_steps": OPTIMIZER_STEPS,
    "step_count": OPTIMIZER_STEPS,
    "optimization_step": OPTIMIZER_STEPS,  # diffusers' EMAModel (its state_dict, its config.json)
    "updates": OPTIMIZER_STEPS,  # YOLOv5 / ultralytics: their ModelEMA's updates, one per optimizer step
    "epoch": EPOCHS,
    "epochs": EPOCHS,
    "current_epoch": EPOCHS,
    "cur_epoch": EPOCHS,
}
# A dict beside the model and optimizer that keeps the loop's counters (DCP apps: {"train_state": {"step"}};
# mmengine: {"meta": {"epoch", "iter"}}).
_PROGRESS_KEY = re.compile(r"(?i)(state|progress|train|meta)")
_SCALER_KEY = re.compile(r"(?i)scaler|amp_scaling")


def integer(value: Any) -> int | None:
    """An int from a plain int or a one-element integral tensor; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) < 1 << 63 else None  # no counter is wider than int64 (nor printable)
    if isinstance(value, float) and value.is_integer():
        return int(value) if abs(value) < 2.0**63 else None
    if isinstance(value, TensorRecord) and value.numel == 1 and value.dtype != "bfloat16":
        try:
            number = scalar(value)
        except (ValueError, TypeError, CheckpointError):
            return None
        return int(number) if number is not None and number.is_integer() else None
    return None


def step_fields(objects: Any) -> list[tuple[str, int]]:
    """Every step-like field (:data:`STEP_KEYS`) of the saved object: (its key, the value), at the top, then
    in a dict beside the model that keeps the loop's progress (``train_state.step``, ``meta.iter``)."""
    objects = fields_of(objects)
    if not isinstance(objects, dict):
        return []
    found = [(key, value) for key in STEP_KEYS if (value := integer(objects.get(key))) is not None]
    for outer, inner in objects.items():
        inner = fields_of(inner)
        if isinstance(outer, str) and _PROGRESS_KEY.search(outer) and isinstance(inner, dict):
            if "param_groups" in inner or any(
                isinstance(v, TensorRecord) and v.numel > 1 for v in inner.values()
            ):
                continue  # an optimizer's or a model's state, not the loop's
            for key in STEP_KEYS:
                value = integer(inner.get(key))
                if value is not None:
                    found.append((f"{outer}.{key}", value))
    return found


def counts_of_field(key: str) -> str:
    """What a step field (a key of :func:`step_fields`, maybe dotted) counts, by :data:`STEP_KEYS`."""
    return STEP_KEYS.get(key.rsplit(".", 1)[-1], OPTIMIZER_STEPS)


def step_field(objects: Any) -> tuple[str, int] | None:
    """The saved object's own optimizer-step count: the first of :func:`step_fields` that counts optimizer
    steps (its key, the value), or None."""
    return next((f for f in step_fields(objects) if counts_of_field(f[0]) == OPTIMIZER_STEPS), None)


def _schedulers(objects: Any, role: Role) -> list[tuple[str, dict[str, Any]]]:
    """The scheduler state dicts of a saved object (a scheduler part itself, or under ``lr_scheduler(s)`` /
    ``scheduler``, one or a list): (where, the dict)."""
    objects = fields_of(objects)
    if not isinstance(objects, dict):
        return []
    candidates: list[tuple[str, Any]] = []
    if role == "scheduler":
        candidates.append(("last_epoch", objects))
    for key in ("lr_schedulers", "lr_scheduler", "scheduler"):
        value = objects.get(key)
        if isinstance(value, list):
            candidates.extend((f"{key}.{i}.last_epoch", v) for i, v in enumerate(value))
        else:
            candidates.append((f"{key}.last_epoch", value))
    return [
        (where, cand) for where, cand in ((w, fields_of(c)) for w, c in candidates) if isinstance(cand, dict)
    ]


def _scheduler_epoch(schedulers: list[tuple[str, dict[str, Any]]]) -> tuple[str, int] | None:
    for where, cand in schedulers:
        value = integer(cand.get("last_epoch"))
        if value is not None:
            return where, value
    return None


def _scheduler_rates(schedulers: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, list[float]]]:
    """Each scheduler's last learning rates (torch's ``_last_lr``): (where, the rates)."""
    out = []
    for where, cand in schedulers:
        rates = rates_of(cand.get("_last_lr"))
        if rates is not None:
            out.append((where.removesuffix("last_epoch").rstrip("."), rates))
    return out


def _group_counters(optimizer: dict[str, Any] | None) -> dict[float, list[str]]:
    """The step an optimizer keeps per param group (``param_groups[i]["step"]``: pytorch-optimizer's
    optimizers, DeepSpeed's and apex's fused Adam) when all its groups agree: value -> one label. One label,
    not one per group: the groups' numbers were pickled at one moment, so their agreement is no evidence of
    its own (only against a step recorded elsewhere)."""
    groups = [fields_of(g) for g in (optimizer or {}).get("param_groups", [])]
    values = set()
    for group in groups:
        try:
            value = scalar(group.get("step")) if isinstance(group, dict) else None
        except (ValueError, TypeError, CheckpointError):
            value = None
        if value is None:
            return {}
        values.add(value)
    if len(values) != 1:
        return {}
    return {values.pop(): [f"param_groups' step ({len(groups)} group(s))"]}


def optimizer_counters(objects: Any) -> dict[str, dict[float, list[str]]]:
    """Per optimizer: its label -> counter value -> the parameters whose ``step`` says so (or, for an
    optimizer that counts per param group, :func:`_group_counters`)."""
    out: dict[str, dict[float, list[str]]] = {}
    optimizers = dict(find_optimizers(objects))
    for label, state in find_optimizer_states(objects):
        counters: dict[float, list[str]] = {}
        for pid, entry in state.items():
            entry = fields_of(entry)
            if not isinstance(entry, dict) or "step" not in entry:
                continue
            try:
                value = scalar(entry["step"])
            except (ValueError, TypeError, CheckpointError):
                value = None
            if value is not None:
                counters.setdefault(value, []).append(label_of(pid, entry))
        counters = counters or _group_counters(optimizers.get(label))
        if counters:
            out[label] = counters
    return out


@dataclass
class PartFacts:
    """What one part of a unit says about the unit's identity, read from its skeleton where the part is: its
    step field, scheduler, optimizer counters, manifest, grad scaler, the framework that knows its object, and
    what the framework itself wants to know (``extra``: DeepSpeed's world size and partitions). JSON-able, so
    a part read in shares on several machines (a DCP directory spread over nodes) is the :meth:`merge` of its
    shares' facts — the same facts one read of the whole part gives."""

    path: str
    role: Role
    step_fields: list[tuple[str, int]] = field(default_factory=list)
    scheduler: tuple[str, int] | None = None
    counters: dict[str, dict[float, list[str]]] = field(default_factory=dict)
    manifest: tuple[str, int] | None = None  # (the manifest's name, its step)
    scaler: bool = False
    skipped_steps: int = 0
    framework: str | None = None  # the framework that knows this part's object (a Lightning .ckpt)
    extra: dict[str, Any] = field(default_factory=dict)
    # (where, rates): each scheduler's last learning rates, each optimizer's param-group rates (.rates)
    scheduler_lrs: list[tuple[str, list[float]]] = field(default_factory=list)
    optimizer_lrs: list[tuple[str, list[float]]] = field(default_factory=list)

    @classmethod
    def of(cls, path: str, role: Role, ckpt: Checkpoint, framework: Framework) -> PartFacts:
        """The facts of an opened part (whole, or the share of it read here)."""
        top = fields_of(ckpt.objects)
        facts = cls(path, role)
        # A step field of an RNG or config file counts something else (accelerate's random_states "step");
        # a metadata part is the loop's own state saved beside the model (accelerate's custom_checkpoint_N).
        facts.step_fields = step_fields(top) if role in ("weights", "optimizer", "state", "metadata") else []
        schedulers = _schedulers(top, role)
        facts.scheduler = _scheduler_epoch(schedulers)
        facts.scheduler_lrs = _scheduler_rates(schedulers)
        facts.optimizer_lrs = optimizer_rates(top)
        facts.counters = optimizer_counters(top)
        if os.path.isfile(path):
            try:
                manifest = read_manifest(path)
            except ValueError:
                manifest = None
            if manifest is not None:
                facts.manifest = (os.path.basename(manifest.path), manifest.step)
        if isinstance(top, dict):
            facts.scaler = any(isinstance(k, str) and _SCALER_KEY.search(k) for k in top)
            facts.skipped_steps = integer(top.get("skipped_steps")) or 0
        facts.framework = next((fw.name for fw in FRAMEWORKS if fw.knows(ckpt.objects)), None)
        facts.extra = framework.part_facts(path, ckpt)
        return facts

    def merge(self, other: PartFacts) -> PartFacts:
        """These facts and another share's of the same part, as one read of both would give them."""
        counters = {label: {v: list(ps) for v, ps in c.items()} for label, c in self.counters.items()}
        for label, theirs in other.counters.items():
            mine = counters.setdefault(label, {})
            for value, params in theirs.items():
                mine.setdefault(value, []).extend(params)
        return PartFacts(
            self.path,
            self.role,
            self.step_fields or other.step_fields,
            self.scheduler or other.scheduler,
            counters,
            self.manifest or other.manifest,
            self.scaler or other.scaler,
            self.skipped_steps or other.skipped_steps,
            self.framework or other.framework,
            {**other.extra, **self.extra},
            self.scheduler_lrs or other.scheduler_lrs,
            self.optimizer_lrs or other.optimizer_lrs,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "role": self.role,
            "step_fields": [list(f) for f in self.step_fields],
            "scheduler": list(self.scheduler) if self.scheduler else None,
            "counters": {
                label: [[value, params] for value, params in c.items()] for label, c in self.counters.items()
            },
            "manifest": list(self.manifest) if self.manifest else None,
            "scaler": self.scaler,
            "skipped_steps": self.skipped_steps,
            "framework": self.framework,
            "extra": self.extra,
            "scheduler_lrs": [[w, r] for w, r in self.scheduler_lrs],
            "optimizer_lrs": [[w, r] for w, r in self.optimizer_lrs],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PartFacts:
        def pair(v: Any) -> tuple[str, int] | None:
            return (str(v[0]), int(v[1])) if v else None

        return cls(
            d["path"],
            d["role"],
            [(str(k), int(v)) for k, v in d.get("step_fields") or []],
            pair(d.get("scheduler")),
            {label: {float(v): list(ps) for v, ps in c} for label, c in d.get("counters", {}).items()},
            pair(d.get("manifest")),
            bool(d.get("scaler")),
            int(d.get("skipped_steps") or 0),
            d.get("framework"),
            dict(d.get("extra") or {}),
            [(str(w), [float(x) for x in r]) for w, r in d.get("scheduler_lrs") or []],
            [(str(w), [float(x) for x in r]) for w, r in d.get("optimizer_lrs") or []],
        )
