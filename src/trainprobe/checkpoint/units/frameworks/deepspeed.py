"""DeepSpeed: ``save_checkpoint`` writes a ``global_step<N>/`` folder (the tag) with the model states
(``mp_rank_00_model_states.pt``: ``module``, ``global_steps``, ``skipped_steps``, ``dp_world_size``,
``param_shapes``, ``lr_scheduler``, ``ds_config``...) and, with ZeRO, one optimizer partition per
data-parallel rank (``[bf16_]zero_pp_rank_<r>_mp_rank_<mm>_optim_states.pt``: flat fp32 partitions, the base
optimizer's state over them and ``param_slice_mappings``, where each parameter's elements lie in the
partition), and a ``latest`` file beside the folder naming the newest tag. ``global_steps`` counts optimizer
steps, fp16 overflow steps included (``skipped_steps`` counts those).

ZeRO-3 partitions the parameters too: one model-states file per rank as well
(``zero_pp_rank_<r>_mp_rank_<mm>_model_states.pt``, empty ``module`` tensors), and each optimizer partition
holds ``fp32_flat_groups``: per param group, every parameter's ceil(numel / world) elements.

What only DeepSpeed can say about a unit (``zero-partitions``): every rank's file of every partition scheme
(:data:`PARTITION_SCHEMES`) is there, as DeepSpeed's own ``zero_to_fp32`` requires, and the partitions
together hold every element of every parameter the model states list, once."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.units.frameworks.base import (
    OPTIMIZER_STEPS,
    STEP_COUNTS,
    FactsOfPart,
    FrameworkBase,
    Layout,
    Part,
    TensorRole,
    role_by_name,
)

if TYPE_CHECKING:
    from trainprobe.checkpoint.reading.base import Checkpoint

_MARKER = re.compile(r"(_model_states\.pt|_optim_states\.pt)$")
_DATA = re.compile(r"(?i)\.(pt|pth|bin|ckpt|safetensors)$")
_MODEL_STATES = re.compile(r"^(?:(?:bf16_)?zero_pp_rank_\d+_)?mp_rank_(\d+)_model_states\.pt$")
_MAX_LISTED = 8


@dataclass(frozen=True)
class PartitionScheme:
    """One way DeepSpeed names a file per data-parallel rank: what the files hold, the ZeRO stages that write
    them, and the name (``prefix`` is ``bf16_`` or empty) of rank ``rank`` of model-parallel rank ``mp``."""

    holds: str
    stages: frozenset[int]
    pattern: re.Pattern[str]  # groups: prefix, rank, mp
    template: str

    def file_name(self, prefix: str, rank: int, mp: int) -> str:
        return self.template.format(prefix=prefix, rank=rank, mp=mp)


#: Every partition scheme of DeepSpeed: each rank's file of each scheme in use must be there.
PARTITION_SCHEMES: tuple[PartitionScheme, ...] = (
    PartitionScheme(
        "optimizer",
        frozenset({1, 2, 3}),
        re.compile(r"^(bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt$"),
        "{prefix}zero_pp_rank_{rank}_mp_rank_{mp:02d}_optim_states.pt",
    ),
    PartitionScheme(
        "model",
        frozenset({3}),
        re.compile(r"^(bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_model_states\.pt$"),
        "{prefix}zero_pp_rank_{rank}_mp_rank_{mp:02d}_model_states.pt",
    ),
)
_OPTIMIZER, _MODEL = PARTITION_SCHEMES


def _fields(obj: Any) -> Any:
    fields = getattr(obj, "fields", None)
    return fields() if callable(fields) else obj


def _numel(shape: Any) -> int | None:
    if not isinstance(shape, (tuple, list)) or not all(isinstance(d, int) for d in shape):
        return None
    n = 1
    for d in shape:
        n *= d
    return n


def _flat_numels(objects: Any) -> list[int] | None:
    """A ZeRO-3 optimizer partition's elements per param group (its ``fp32_flat_groups``), or None."""
    osd = _fields(objects.get("optimizer_state_dict")) if isinstance(objects, dict) else None
    groups = osd.get("fp32_flat_groups") if isinstance(osd, dict) else None
    if not isinstance(groups, list):
        return None
    numels = [_numel(getattr(g, "shape", None)) for g in groups]
    return [n for n in numels if n is not None] if all(n is not None for n in numels) else None


def _fragments(objects: Any) -> list[dict[str, int]] | None:
    """Per param group of a partition: parameter name -> elements this partition holds."""
    osd = _fields(objects.get("optimizer_state_dict")) if isinstance(objects, dict) else None
    mappings = osd.get("param_slice_mappings") if isinstance(osd, dict) else None
    if not isinstance(mappings, list):
        return None
    out = []
    for group in mappings:
        held: dict[str, int] = {}
        for name, where in group.items() if isinstance(group, dict) else ():
            numel = _fields(where).get("numel") if isinstance(_fields(where), dict) else None
            if isinstance(numel, int):
                held[str(name)] = numel
        out.append(held)
    return out


class DeepSpeed(FrameworkBase):
    name = "deepspeed"
    # global_steps counts every optimizer step; skipped_steps says how many fp16 overflows skipped.
    exact_steps = True
    # ZeRO partitions are flat: the zero-partitions evidence below says whether they cover the model.
    covers_by_partition = True
    counts: ClassVar[Mapping[str, str]] = {**STEP_COUNTS, "scheduler": OPTIMIZER_STEPS}

    def layout(self, folder: str, files: Sequence[str], dirs: Sequence[str]) -> Layout | None:
        # A tag folder holds DeepSpeed's states and nothing else that looks like a checkpoint.
        data = [f for f in files if _DATA.search(f)]
        if not data or not all(_MARKER.search(f) for f in data):
            return None
        return Layout(self.name, [Part(os.path.join(folder, f), role_by_name(f)) for f in files])

    def knows(self, objects: Any) -> bool:
        return isinstance(objects, dict) and "ds_version" in objects

    def tensor_role(self, name: str) -> TensorRole | None:
        if name.startswith("module."):
            return "weights"
        if name.startswith(("optimizer_state_dict.", "optimizer.")):
            return "optimizer"
        return None

    def part_facts(self, path: str, ckpt: Checkpoint) -> dict[str, Any]:
        """Model states: the data-parallel world size and every parameter's element count (per param group);
        an optimizer partition: how many elements of each parameter it holds."""
        objects = ckpt.objects
        if not isinstance(objects, dict):
            return {}
        name = os.path.basename(path)
        if _MODEL_STATES.match(name):
            world = objects.get("dp_world_size")
            shapes = objects.get("param_shapes")
            sizes: list[dict[str, int]] = []
            for group in shapes if isinstance(shapes, list) else []:
                items = group.items() if isinstance(group, dict) else ()
                sizes.append({str(k): n for k, v in items if (n := _numel(v)) is not None})
            ok = isinstance(world, int) and not isinstance(world, bool)
            return {"dp_world_size": world if ok else None, "param_numels": sizes}
        if _OPTIMIZER.pattern.match(name):
            flat = _flat_numels(objects)
            return {"fragments": _fragments(objects)} if flat is None else {"flat_numels": flat}
        return {}

    def parts_evidence(self, parts: Sequence[Part], facts: Sequence[FactsOfPart]) -> list[Evidence]:
        """``zero-partitions``: one optimizer partition per data-parallel rank and model-parallel rank, and
        together they cover every element of every parameter of the model states."""
        states: dict[int, Mapping[str, Any]] = {}
        fragments: dict[str, list[dict[str, int]] | None] = {}
        flat: dict[str, list[int]] = {}
        for f in facts:
            name = os.path.basename(f.path)
            m = _MODEL_STATES.match(name)
            if m and "param_numels" in f.extra:
                states.setdefault(int(m.group(1)), f.extra)
            elif "fragments" in f.extra:
                fragments[name] = f.extra["fragments"]
            elif "flat_numels" in f.extra:
                flat[name] = f.extra["flat_numels"]
        present: dict[tuple[str, int, int], str] = {}
        prefix = ""
        for part in parts:
            for scheme in PARTITION_SCHEMES:
                m = scheme.pattern.match(os.path.basename(part.path))
                if m:
                    present[(scheme.holds, int(m.group(2)), int(m.group(3)))] = os.path.basename(part.path)
                    prefix = m.group(1) or ""
        if not states and present and not any(_MODEL_STATES.match(os.path.basename(p.path)) for p in parts):
            return [_no_model_states(sorted(present.values()))]
        world = next((s["dp_world_size"] for s in states.values() if s.get("dp_world_size")), None)
        if not states or world is None or (not present and world <= 1):
            return []
        # ZeRO-3 shows itself by its per-rank model states or its flat fp32 groups
        stage3 = bool(flat) or any(holds == _MODEL.holds for holds, _r, _mp in present)
        schemes = [s for s in PARTITION_SCHEMES if (3 in s.stages if stage3 else s.stages - {3})]
        out = []
        for mp, s in sorted(states.items()):
            missing = [
                scheme.file_name(prefix, r, mp)
                for scheme in schemes
                for r in range(world)
                if (scheme.holds, r, mp) not in present
            ]
            if stage3:
                out.append(_zero3_partitions(mp, s["param_numels"], world, missing, present, flat))
            else:
                out.append(self._partitions(mp, s["param_numels"], world, missing, present, fragments))
        return out

    def _partitions(
        self,
        mp: int,
        sizes: list[dict[str, int]],
        world: int,
        missing: list[str],
        present: dict[tuple[str, int, int], str],
        fragments: dict[str, list[dict[str, int]] | None],
    ) -> Evidence:
        held = [dict.fromkeys(group, 0) for group in sizes]
        mapped = 0
        for (_holds, _r, pmp), name in present.items():
            for g, group in enumerate(fragments.get(name) or [] if pmp == mp else []):
                mapped += 1
                for param, numel in group.items():
                    if g < len(held) and param in held[g]:
                        held[g][param] += numel
        total = sum(sum(g.values()) for g in sizes)
        # (parameter, elements held, elements it has) where the two differ
        short = [
            (name, n, sizes[g][name])
            for g, group in enumerate(held)
            for name, n in group.items()
            if n != sizes[g][name]
        ]
        lacking = sum(max(0, want - have) for _n, have, want in short)
        where = f"mp_rank_{mp:02d}"
        if missing:
            names = ", ".join(n for n, have, want in short if have < want)
            lost = (
                f": {lacking:,} of {total:,} optimizer elements have no state ({names})"
                if mapped and lacking
                else ""
            )
            return Evidence(
                "zero-partitions",
                "fail",
                f"{', '.join(missing)} missing: {len(missing)} of the {world} ZeRO optimizer partitions of "
                f"{where} (one per data-parallel rank){lost}",
                indicates="corrupt",
                tensors=[n for n, have, want in short if have < want][:_MAX_LISTED],
                values={"missing": missing, "world": world, "elements_without_state": lacking},
            )
        if mapped and short:
            return Evidence(
                "zero-partitions",
                "fail",
                f"the {world} ZeRO optimizer partitions of {where} do not cover the parameters exactly "
                "once: " + ", ".join(f"{n}: {have:,} of {want:,} elements" for n, have, want in short[:3]),
                indicates="corrupt",
                tensors=[n for n, _h, _w in short][:_MAX_LISTED],
            )
        params = sum(len(g) for g in sizes)
        if not mapped:
            return Evidence(
                "zero-partitions",
                "pass",
                f"all {world} ZeRO optimizer partitions of {where} are there (they say nothing of which "
                "elements they hold)",
            )
        return Evidence(
            "zero-partitions",
            "pass",
            f"the {world} ZeRO optimizer partitions of {where} cover all {total:,} elements of the {params} "
            "parameters, once",
        )


def _no_model_states(partitions: list[str]) -> Evidence:
    return Evidence(
        "zero-partitions",
        "fail",
        f"no model-states file beside the {len(partitions)} ZeRO partition(s) ({', '.join(partitions[:3])}): "
        "DeepSpeed's load_checkpoint and zero_to_fp32 read the parameters and their shapes there",
        indicates="corrupt",
        values={"missing": ["*model_states.pt"]},
    )


def _zero3_partitions(
    mp: int,
    sizes: list[dict[str, int]],
    world: int,
    missing: list[str],
    present: dict[tuple[str, int, int], str],
    flat: dict[str, list[int]],
) -> Evidence:
    """ZeRO-3: every rank's model states and optimizer partition, each partition holding, per param group,
    ceil(numel / world) elements of every parameter (what ``zero_to_fp32`` reads back)."""
    where = f"mp_rank_{mp:02d}"
    if missing:
        return Evidence(
            "zero-partitions",
            "fail",
            f"{', '.join(missing)} missing: of the {world} ranks' ZeRO-3 partitions of {where} (a "
            "model-states and an optimizer file per data-parallel rank), each rank's load_checkpoint reads "
            "its own two (and DeepSpeed's zero_to_fp32 refuses a directory without every optimizer one)",
            indicates="corrupt",
            values={"missing": missing, "world": world},
        )
    want = [sum(-(-n // world) for n in group.values()) for group in sizes]
    wrong = [
        f"{name}: {have} elements where the model states need {want}"
        for (holds, _r, pmp), name in sorted(present.items())
        if holds == _OPTIMIZER.holds and pmp == mp and (have := flat.get(name)) is not None and have != want
    ]
    if wrong:
        return Evidence(
            "zero-partitions",
            "fail",
            f"the {world} ZeRO-3 optimizer partitions of {where} do not hold their share of the parameters: "
            + "; ".join(wrong[:3]),
            indicates="corrupt",
        )
    total = sum(sum(group.values()) for group in sizes)
    return Evidence(
        "zero-partitions",
        "pass",
        f"all {world} ranks' ZeRO-3 model-states and optimizer partitions of {where} are there, and together "
        f"they hold all {total:,} elements of the {sum(len(g) for g in sizes)} parameters",
    )
