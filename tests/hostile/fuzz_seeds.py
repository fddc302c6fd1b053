"""The fuzzer's seeds: a checkpoint of every format trainprobe reads, written by torch 2.13, the safetensors
package and the standard library (``write_seeds``), each with the mutations that reach inside it."""

from __future__ import annotations

import argparse
import collections
import io
import json
import pickle
import random
import tarfile
import warnings
from pathlib import Path
from typing import Any

import torch

from hostile.fuzz import (
    Seed,
    mutate_bytes,
    mutate_json,
    mutate_pickle,
    resize_safetensors,
    rezip_pickle,
)


def mutate_legacy(rng: random.Random, raw: bytes) -> tuple[bytes, list[str]]:
    """One of a legacy file's five pickles mutated by its opcodes, the rest (and the storages) kept."""
    import pickletools

    bounds = []
    pos = 0
    try:
        for _ in range(5):
            end = pos
            for _op, _arg, at in pickletools.genops(raw[pos:]):
                end = pos + at + 1
            bounds.append((pos, end))
            pos = end
    except Exception:
        return mutate_bytes(rng, raw)
    start, end = rng.choice(bounds)
    piece, done = mutate_pickle(rng, raw[start:end])
    return raw[:start] + piece + raw[end:], done


def _state() -> dict[str, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    return {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "extra": {
            "bf16": torch.tensor([1.0, -2.0], dtype=torch.bfloat16),
            "view": base[1:, 1:3],
            "ids": torch.tensor([1, 2, 3]),
            "param": torch.nn.Parameter(torch.ones(2)),
        },
        "epoch": 3,
        "global_step": 12,
    }


def write_seeds(root: Path) -> list[Seed]:
    """Checkpoints torch, safetensors and the standard library write, one seed per reader, under ``root``."""
    state = _state()
    torch.save(state, root / "plain.pt")
    torch.save(state, root / "legacy.pt", _use_new_zipfile_serialization=False)

    from safetensors.torch import save_file

    flat = {"a.weight": torch.randn(3, 4), "a.bias": torch.zeros(4), "emb": torch.ones(2, 2).bfloat16()}
    save_file(flat, str(root / "model.safetensors"), metadata={"format": "pt"})

    hf = root / "hf"
    hf.mkdir()
    save_file({"a.weight": flat["a.weight"]}, str(hf / "model-00001-of-00002.safetensors"))
    save_file({"a.bias": flat["a.bias"]}, str(hf / "model-00002-of-00002.safetensors"))
    index = {
        "metadata": {"total_size": 64},
        "weight_map": {
            "a.weight": "model-00001-of-00002.safetensors",
            "a.bias": "model-00002-of-00002.safetensors",
        },
    }
    (hf / "model.safetensors.index.json").write_text(json.dumps(index))

    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # single process, no process group: torch says so
        dcp.save({"model": state["model"], "step": 12}, checkpoint_id=str(root / "dcp"))

    bare = {"cfg": argparse.Namespace(lr=0.1), "order": collections.OrderedDict(a=1), "seen": {1, 2}}
    (root / "bare.pkl").write_bytes(pickle.dumps(bare, protocol=2))
    (root / "bare4.pkl").write_bytes(pickle.dumps({**bare, "blob": b"x" * 300}, protocol=4))

    with tarfile.open(root / "old.tar", "w") as tar:
        for name, obj in (("sys_info", {"little_endian": True}), ("pickle", {"w": 1}), ("storages", [])):
            data = pickle.dumps(obj, protocol=2)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

    return [
        Seed("torch-zip", root / "plain.pt", (mutate_bytes, rezip_pickle, rezip_pickle)),
        Seed("torch-legacy", root / "legacy.pt", (mutate_bytes, mutate_legacy, mutate_legacy)),
        Seed(
            "safetensors", root / "model.safetensors", (mutate_bytes, resize_safetensors, resize_safetensors)
        ),
        Seed("hf-index", hf, (mutate_json, mutate_bytes), target="model.safetensors.index.json"),
        Seed("hf-shard", hf, (resize_safetensors, mutate_bytes), target="model-00001-of-00002.safetensors"),
        Seed("dcp-metadata", root / "dcp", (mutate_pickle, mutate_pickle, mutate_bytes), target=".metadata"),
        Seed("dcp-data", root / "dcp", (mutate_bytes,), target="__0_0.distcp"),
        Seed("pickle", root / "bare.pkl", (mutate_pickle, mutate_bytes)),
        Seed("pickle-4", root / "bare4.pkl", (mutate_pickle, mutate_bytes)),
        Seed("torch-tar", root / "old.tar", (mutate_bytes,)),
    ]


#: Framework checkpoints to mutate (tests/fixtures/frameworks): unit name -> the files inside it to mutate
#: (empty: the unit is a file).
FRAMEWORK_TARGETS: dict[str, tuple[str, ...]] = {
    "lightning/steps/step=4": (),
    "hf-trainer/checkpoint-2": (
        "model.safetensors",
        "optimizer.pt",
        "trainer_state.json",
        "training_args.bin",
    ),
    "accelerate/checkpoint_0": ("custom_checkpoint_0.pkl", "random_states_0.pkl", "optimizer.bin"),
    "deepspeed/zero1/global_step2": (
        "mp_rank_00_model_states.pt",
        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
    ),
    "dcp/ddp/step_2": (".metadata", "__0_0.distcp"),
    "torch-formats/torchscript": (),
    "torch-formats/quantized": (),
    "torch-formats/whole-module": (),
    "torch-optimizers/adam-fused": (),
}


def mutators_for(name: str) -> tuple[Any, ...]:
    """The mutations that reach inside a file of this name."""
    if name.endswith(".safetensors"):
        return (resize_safetensors, resize_safetensors, mutate_bytes)
    if name.endswith(".json"):
        return (mutate_json, mutate_bytes)
    if name.endswith((".pkl", ".metadata")):
        return (mutate_pickle, mutate_pickle, mutate_bytes)
    if name.endswith(".distcp"):
        return (mutate_bytes,)
    return (rezip_pickle, rezip_pickle, mutate_bytes)  # torch zip: .pt .bin .pth .ckpt


def framework_seeds(units: Any) -> list[Seed]:
    """Seeds from the framework fixtures that were generated (``framework_units``); a framework that is
    not installed contributes none."""
    seeds = []
    available = set(units.names())
    for unit, targets in FRAMEWORK_TARGETS.items():
        if unit not in available:
            continue
        path = units.path(unit)
        if not targets:
            seeds.append(Seed(unit.replace("/", "_"), path, mutators_for(path.name)))
        for target in targets:
            if (path / target).is_file():
                name = f"{unit}/{target}".replace("/", "_")
                seeds.append(Seed(name, path, mutators_for(target), target=target))
    return seeds
