"""The framework fixtures are what the frameworks really write: every generator ran, every unit has the files
its framework writes, and torch reads them back the way users do (``weights_only=True`` where torch allows it;
where it refuses, it refuses for the reason we document)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from fixtures.frameworks.catalog import GENERATORS

torch = pytest.importorskip("torch")

HF_CHECKPOINT_FILES = {
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "optimizer.pt",
    "scheduler.pt",
    "rng_state.pth",
    "trainer_state.json",
    "training_args.bin",
}
ACCELERATE_FILES = {
    "model.safetensors",
    "optimizer.bin",
    "scheduler.bin",
    "random_states_0.pkl",
    "custom_checkpoint_0.pkl",
}


def load(path: Path) -> Any:
    return torch.load(path, weights_only=True, map_location="cpu")


@pytest.mark.parametrize("generator", [g.name for g in GENERATORS])
def test_every_generator_ran(framework_units: Any, generator: str) -> None:
    status = framework_units.generator_status(generator)
    if status["status"] == "missing":
        pytest.skip(f"{generator} needs {', '.join(status['missing'])}")
    assert status["status"] == "ok", status.get("error")
    assert any(u.startswith(f"{generator}/") for u in framework_units.names())


def test_every_listed_file_exists_and_nothing_else(framework_units: Any) -> None:
    for name in framework_units.names():
        unit = framework_units.unit(name)
        path = framework_units.path(name)
        assert path.exists(), name
        if unit.kind == "file":
            assert path.is_file()
            assert not unit.files
        else:
            on_disk = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
            assert on_disk == list(unit.files), name


@pytest.mark.parametrize("step", [2, 4])
def test_hf_trainer_checkpoint(framework_units: Any, step: int) -> None:
    path = framework_units.path(f"hf-trainer/checkpoint-{step}")
    assert set(framework_units.unit(f"hf-trainer/checkpoint-{step}").files) == HF_CHECKPOINT_FILES
    state = json.loads((path / "trainer_state.json").read_text())
    assert state["global_step"] == step
    assert Path(state["best_model_checkpoint"]) in {
        path.parent / "checkpoint-2",
        path.parent / "checkpoint-4",
    }
    assert isinstance(state["best_metric"], float)
    optimizer = load(path / "optimizer.pt")
    assert (
        {int(optimizer["state"][0]["step"])}
        == {int(s["step"]) for s in optimizer["state"].values()}
        == {step}
    )
    assert load(path / "scheduler.pt")["last_epoch"] == step
    with pytest.raises(Exception, match="TrainingArguments"):
        load(path / "training_args.bin")  # a pickled transformers dataclass: torch refuses it by default
    with pytest.raises(Exception, match=r"numpy\..*_reconstruct"):
        load(path / "rng_state.pth")  # numpy RNG state: numpy arrays pickled by reduce


def test_hf_sharded_model(framework_units: Any) -> None:
    path = framework_units.path("hf-trainer/sharded")
    index = json.loads((path / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert shards == framework_units.unit("hf-trainer/sharded").facts["shards"]
    assert len(shards) >= 2
    assert all((path / s).exists() for s in shards)


@pytest.mark.parametrize(
    ("run", "stage", "bf16"),
    [("zero1", 1, False), ("zero2", 2, False), ("zero1-bf16", 1, True), ("zero2-bf16", 2, True)],
)
def test_deepspeed_run(framework_units: Any, run: str, stage: int, bf16: bool) -> None:
    path = framework_units.path(f"deepspeed/{run}")
    assert (path / "latest").read_text().strip() == "global_step4"
    assert (path / "zero_to_fp32.py").exists()
    prefix = "bf16_" if bf16 else ""
    for step in (2, 4):
        unit = framework_units.unit(f"deepspeed/{run}/global_step{step}")
        assert set(unit.files) == {
            "mp_rank_00_model_states.pt",
            f"{prefix}zero_pp_rank_0_mp_rank_00_optim_states.pt",
            f"{prefix}zero_pp_rank_1_mp_rank_00_optim_states.pt",
        }
        states = load(path / f"global_step{step}" / "mp_rank_00_model_states.pt")
        assert states["global_steps"] == step
        assert states["dp_world_size"] == 2
        assert states["ds_config"]["zero_optimization"]["stage"] == stage
        assert {v.dtype for v in states["module"].values()} == {torch.bfloat16 if bf16 else torch.float32}
        # The optimizer partitions pickle DeepSpeed classes (LossScaler, ZeroStageEnum, fragment_address).
        with pytest.raises(Exception, match="deepspeed"):
            load(path / f"global_step{step}" / f"{prefix}zero_pp_rank_0_mp_rank_00_optim_states.pt")


@pytest.mark.parametrize(
    ("name", "world"), [("ddp/step_4", 2), ("fsdp2/step_4", 2), ("fsdp2-4ranks/step_3", 4)]
)
def test_dcp_checkpoint_has_one_file_per_rank(framework_units: Any, name: str, world: int) -> None:
    unit = framework_units.unit(f"dcp/{name}")
    assert set(unit.files) == {".metadata", *(f"__{rank}_0.distcp" for rank in range(world))}


def test_fsdp2_chunks_are_spread_over_every_rank(framework_units: Any) -> None:
    from torch.distributed.checkpoint import FileSystemReader

    path = framework_units.path("dcp/fsdp2-4ranks/step_3")
    metadata = FileSystemReader(str(path)).read_metadata()
    chunks = metadata.state_dict_metadata["optimizer.state.0.weight.exp_avg_sq"].chunks
    assert sorted(tuple(c.offsets) for c in chunks) == [(0, 0), (4, 0), (8, 0), (12, 0)]
    files = {
        info.relative_path for key, info in metadata.storage_data.items() if key.fqn.endswith("exp_avg_sq")
    }
    assert files == {f"__{rank}_0.distcp" for rank in range(4)}


def test_lightning_checkpoints_hold_inf_placeholders_before_a_best_exists(framework_units: Any) -> None:
    early = load(framework_units.path("lightning/steps/step=2"))
    assert early["global_step"] == 2
    monitor = next(v for k, v in early["callbacks"].items() if "'monitor': 'val_loss'" in k)
    assert monitor["best_model_score"] is None
    assert torch.isinf(monitor["kth_value"])
    after_first = load(framework_units.path("lightning/best/epoch=0-step=4-val_loss=0.926"))
    monitor = next(v for k, v in after_first["callbacks"].items() if "'monitor': 'val_loss'" in k)
    assert torch.isfinite(monitor["best_model_score"])
    assert torch.isinf(monitor["kth_value"])
    for name in framework_units.names(framework="lightning", kind="file"):
        saved = load(framework_units.path(name))
        assert saved["global_step"] == framework_units.unit(name).step
        assert all(torch.isfinite(t).all() for t in saved["state_dict"].values())


def test_accelerate_saves_are_numbered_by_save_not_step(framework_units: Any) -> None:
    for index, step in ((0, 2), (1, 4)):
        unit = framework_units.unit(f"accelerate/checkpoint_{index}")
        assert set(unit.files) == ACCELERATE_FILES
        assert unit.step == step
        path = framework_units.path(f"accelerate/checkpoint_{index}")
        assert load(path / "custom_checkpoint_0.pkl") == {"step": step}
        assert int(load(path / "optimizer.bin")["state"][0]["step"]) == step


def test_step_folders(framework_units: Any) -> None:
    for step in (2, 4, 6):
        path = framework_units.path(f"step-folders/step_{step}")
        assert int(load(path / "optimizer.pt")["state"][0]["step"]) == step
        assert set(load(path / "model.pt")) == {
            "0.weight",
            "0.bias",
            "1.weight",
            "1.bias",
            "3.weight",
            "3.bias",
        }


def test_torch_optimizer_state_keys(framework_units: Any) -> None:
    from fixtures.frameworks.torch_optimizers import OPTIMIZERS

    for variant, (_family, _factory, keys) in OPTIMIZERS.items():
        saved = load(framework_units.path(f"torch-optimizers/{variant}"))
        assert saved["step"] == 3
        written = {key for entry in saved["optimizer"]["state"].values() for key in entry}
        assert written == set(keys), variant


def test_factored_and_8bit_optimizer_state(framework_units: Any) -> None:
    hf = load(framework_units.path("hf-adafactor/adafactor-hf"))["optimizer"]["state"]
    assert hf[0]["exp_avg_sq_row"].shape == (16,)
    assert hf[0]["exp_avg_sq_col"].shape == (8,)
    assert hf[1]["exp_avg_sq"].shape == (16,)  # 1-D parameters keep a full second moment
    torch_adafactor = load(framework_units.path("torch-optimizers/adafactor-torch"))["optimizer"]["state"]
    assert torch_adafactor[0]["row_var"].shape == (16, 1)
    assert torch_adafactor[0]["col_var"].shape == (1, 8)
    lion = load(framework_units.path("lion/lion"))["optimizer"]["state"]
    assert set(lion[0]) == {"exp_avg"}  # no step counter at all
    quant = load(framework_units.path("bnb-8bit/adam-8bit"))["optimizer"]["state"][0]
    inner = quant["__bnb_optimizer_quant_state__"]
    assert inner["state1"].dtype == torch.uint8
    assert inner["state1"].shape == (16, 8)
    assert inner["qmap1"].shape == (256,)
    assert inner["absmax1"].dtype == torch.float32


def test_torchscript_and_whole_modules(framework_units: Any) -> None:
    script = framework_units.path("torch-formats/torchscript")
    with zipfile.ZipFile(script) as archive:
        names = archive.namelist()
    assert any("/code/" in n for n in names)
    assert any(n.endswith("constants.pkl") for n in names)
    with (
        pytest.raises(RuntimeError, match="TorchScript"),
        pytest.warns(UserWarning, match="looks like a TorchScript archive"),
    ):
        load(script)
    for name in ("torch-formats/whole-module", "torch-formats/whole-module-custom"):
        with pytest.raises(Exception, match=r"Sequential|UserBlock"):
            load(framework_units.path(name))


# torch's own qtensor rebuild warns (TypedStorage; quantized dtypes are deprecated in torch 2.13)
@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated:UserWarning")
@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
def test_quantized_tensors(framework_units: Any) -> None:
    quantized = load(framework_units.path("torch-formats/quantized"))
    assert quantized["per_channel"].qscheme() == torch.per_channel_affine
    assert quantized["per_tensor"].qscheme() == torch.per_tensor_affine
    assert quantized["model"]["0._packed_params._packed_params"][0].is_quantized
