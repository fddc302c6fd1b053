"""Real checkpoints written by torch 2.13 (and the safetensors package) once per session, with the torch
tensors they hold so tests can compare what trainprobe reads against what torch wrote."""

from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")


@dataclass
class Written:
    path: Path
    format: str
    tensors: dict[str, Any]  # expected record name -> torch tensor
    param_names: dict[str, str]  # record name -> expected param_name


def _model_and_optimizer() -> tuple[Any, Any]:
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    return model, opt


def _flat(prefix: str, sd: dict[str, Any]) -> dict[str, Any]:
    return {f"{prefix}.{k}": v for k, v in sd.items()}


def _optimizer_expectations(prefix: str, opt: Any, names: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    tensors: dict[str, Any] = {}
    params: dict[str, str] = {}
    for idx, state in opt.state_dict()["state"].items():
        for key, value in state.items():
            name = f"{prefix}.state.{idx}.{key}"
            tensors[name] = value
            params[name] = names[idx]
    return tensors, params


def _mixed_dtypes() -> dict[str, Any]:
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    return {
        "f64": torch.linspace(-1, 1, 5, dtype=torch.float64),
        "f32": base,
        "f16": torch.tensor([1.5, -2.0, 0.0], dtype=torch.float16),
        "bf16": torch.tensor([1.0, -3.5, 100.0], dtype=torch.bfloat16),
        "e4m3fn": torch.tensor([0.5, -1.0, 2.0], dtype=torch.float8_e4m3fn),
        "e5m2": torch.tensor([0.5, -1.0, 2.0], dtype=torch.float8_e5m2),
        "c64": torch.tensor([1 + 2j, -3j], dtype=torch.complex64),
        "i64": torch.tensor([1, 2, 3]),
        "mask": torch.tensor([True, False]),
        "view": base[1:, 2:5],  # a strided view into a larger storage, with an offset
        "transposed": base.t(),
        "param": torch.nn.Parameter(torch.ones(3)),
    }


@pytest.fixture(scope="session")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Written]:
    root = tmp_path_factory.mktemp("written")
    out: dict[str, Written] = {}
    model, opt = _model_and_optimizer()
    msd = model.state_dict()
    names = list(msd.keys())

    # Plain torch.save of a training dict (zip format), with every kind of tensor the readers must handle.
    mixed = _mixed_dtypes()
    opt_t, opt_p = _optimizer_expectations("optimizer_state_dict", opt, names)
    obj = {"model_state_dict": msd, "optimizer_state_dict": opt.state_dict(), "extra": mixed, "step": 7}
    torch.save(obj, root / "plain.pt")
    out["plain"] = Written(
        root / "plain.pt",
        "torch-zip",
        {**_flat("model_state_dict", msd), **opt_t, **_flat("extra", mixed)},
        opt_p,
    )

    # The same object in the legacy (pre-1.6) format.
    legacy_mixed = {k: v for k, v in mixed.items() if not k.startswith(("e4m3", "e5m2"))}
    legacy = {"model_state_dict": msd, "optimizer_state_dict": opt.state_dict(), "extra": legacy_mixed}
    torch.save(legacy, root / "legacy.pth", _use_new_zipfile_serialization=False)
    out["legacy"] = Written(
        root / "legacy.pth",
        "torch-legacy",
        {**_flat("model_state_dict", msd), **opt_t, **_flat("extra", legacy_mixed)},
        opt_p,
    )

    # Lightning's layout: state_dict with "model." prefixes, a list of optimizer states.
    lsd = {f"model.{k}": v for k, v in msd.items()}
    lightning = {
        "epoch": 3,
        "global_step": 1,  # what Lightning counts: the optimizer stepped once
        "pytorch-lightning_version": "2.4.0",
        "state_dict": lsd,
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [{"last_epoch": 3}],
        "hyper_parameters": {"lr": 1e-3},
    }
    torch.save(lightning, root / "epoch=3.ckpt")
    lt, lp = _optimizer_expectations("optimizer_states.0", opt, [f"model.{n}" for n in names])
    out["lightning"] = Written(root / "epoch=3.ckpt", "torch-zip", {**_flat("state_dict", lsd), **lt}, lp)

    # DeepSpeed's model-states file: the model under "module", no optimizer (that lives in other files).
    ds = {"module": msd, "buffer_names": [], "optimizer": None, "lr_scheduler": None, "global_steps": 5}
    torch.save(ds, root / "mp_rank_00_model_states.pt")
    out["deepspeed"] = Written(root / "mp_rank_00_model_states.pt", "torch-zip", _flat("module", msd), {})

    # safetensors written by the safetensors package.
    from safetensors.torch import save_file

    st = {
        "w": torch.randn(3, 4),
        "b16": torch.randn(5).to(torch.bfloat16),
        "h": torch.randn(2, 2).to(torch.float16),
        "ids": torch.arange(4, dtype=torch.int32),
    }
    save_file(st, str(root / "model.safetensors"), metadata={"format": "pt"})
    out["safetensors"] = Written(root / "model.safetensors", "safetensors", st, {})

    # Hugging Face sharded: safetensors shards and .bin shards, each with its index.
    for kind in ("safetensors", "bin"):
        folder = root / f"hf-{kind}"
        folder.mkdir()
        shards = [{"a.weight": torch.randn(4, 4), "a.bias": torch.randn(4)}, {"b.weight": torch.randn(2, 4)}]
        weight_map = {}
        for i, shard in enumerate(shards, 1):
            name = f"model-{i:05d}-of-00002.{kind}"
            if kind == "safetensors":
                save_file(shard, str(folder / name))
            else:
                torch.save(shard, folder / name)
            weight_map.update(dict.fromkeys(shard, name))
        index = (
            folder / f"model.{kind}.index.json"
            if kind == "safetensors"
            else folder / "pytorch_model.bin.index.json"
        )
        index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
        out[f"hf-{kind}"] = Written(index, "hf-sharded", {k: v for s in shards for k, v in s.items()}, {})

    # torch.distributed.checkpoint, saved from a single process.
    import torch.distributed.checkpoint as dcp

    dcp_dir = root / "dcp"
    shutil.rmtree(dcp_dir, ignore_errors=True)
    state = {"model": msd, "optim": opt.state_dict(), "bf": torch.ones(3, dtype=torch.bfloat16)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "assuming the intent is to save in a single process"
        dcp.save(state, checkpoint_id=str(dcp_dir), no_dist=True)
    dt, dp = _optimizer_expectations("optim", opt, names)
    out["dcp"] = Written(dcp_dir, "torch-dcp", {**_flat("model", msd), **dt, "bf": state["bf"]}, dp)
    return out
