"""The damage helpers do exactly what their Damage record says, on a copy, and the damaged files stay readable
by torch where the damage is in the values (a NaN), not in the bytes."""

from __future__ import annotations

import filecmp
import hashlib
import io
import warnings
from pathlib import Path
from typing import Any

import pytest

from fixtures.frameworks import damage

torch = pytest.importorskip("torch")


def digest(path: Path) -> str:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    sha = hashlib.sha256()
    for file in files:
        sha.update(file.read_bytes())
    return sha.hexdigest()


def tensor_at(obj: Any, key: str) -> Any:
    for part in key.split("."):
        obj = (
            obj[int(part)]
            if isinstance(obj, (list, tuple)) or (isinstance(obj, dict) and part not in obj)
            else obj[part]
        )
    return obj


@pytest.mark.parametrize(
    ("unit", "rank"),
    [
        ("hf-trainer/checkpoint-4", 0),
        ("torch-optimizers/adam", 0),
        ("lightning/steps/step=2", 0),
        ("accelerate/checkpoint_1", 0),
        ("step-folders/step_4", 0),
        ("deepspeed/zero2", 1),
    ],
)
def test_nan_in_exp_avg_sq(framework_units: Any, tmp_path: Path, unit: str, rank: int) -> None:
    source = framework_units.path(unit)
    before = digest(source)
    result = damage.nan_in_exp_avg_sq(source, tmp_path, rank=rank)
    assert digest(source) == before
    assert result.root == tmp_path / source.name
    assert result.tensor is not None
    assert result.tensor.endswith("exp_avg_sq")
    loaded = torch.load(result.file, weights_only=False, map_location="cpu")
    changed = tensor_at(loaded, result.tensor)
    assert int(torch.isnan(changed).sum()) == 1
    assert torch.isnan(changed.view(-1)[0])
    if rank:
        assert f"zero_pp_rank_{rank}_" in result.file.name
        other = torch.load(
            result.file.parent / "zero_pp_rank_0_mp_rank_00_optim_states.pt", weights_only=False
        )
        assert not torch.isnan(tensor_at(other, result.tensor)).any()


def test_nan_in_one_dcp_rank_file(framework_units: Any, tmp_path: Path) -> None:
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    source = framework_units.path("dcp/fsdp2-4ranks/step_3")
    result = damage.nan_in_exp_avg_sq(source, tmp_path, rank=2)
    assert result.file.name == "__2_0.distcp"
    assert result.tensor == "optimizer.state.0.weight.exp_avg_sq"
    assert "offsets [8, 0]" in result.detail  # rank 2 holds rows 8..11 of the 16-row weight
    for rank in (0, 1, 3):
        assert filecmp.cmp(source / f"__{rank}_0.distcp", result.root / f"__{rank}_0.distcp", shallow=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DCP warns that it runs without a process group
        dcp_to_torch_save(result.root, tmp_path / "full.pt")
    state = torch.load(tmp_path / "full.pt", weights_only=True)["optimizer"]["state"]
    bad = {name: torch.isnan(s["exp_avg_sq"]).nonzero().tolist() for name, s in state.items()}
    assert {name: where for name, where in bad.items() if where} == {"0.weight": [[8, 0]]}


def test_truncate(framework_units: Any, tmp_path: Path) -> None:
    source = framework_units.path("hf-trainer/checkpoint-4")
    result = damage.truncate(source, tmp_path, "optimizer.pt")
    size = (source / "optimizer.pt").stat().st_size
    assert result.file.stat().st_size == size // 2
    assert result.detail == f"truncated at byte {size // 2} of {size}"
    with pytest.raises((RuntimeError, OSError)):  # torch: "Invalid argument" from its zip reader
        torch.load(result.file, weights_only=True)


def test_missing_shard_and_rank_files(framework_units: Any, tmp_path: Path) -> None:
    shard = damage.missing_shard(framework_units.path("hf-trainer/sharded"), tmp_path / "hf")
    assert shard.file.name == "model-00002-of-00004.safetensors"
    assert not shard.file.exists()
    assert (shard.root / "model.safetensors.index.json").exists()
    dcp = damage.missing_rank_file(framework_units.path("dcp/fsdp2-4ranks/step_3"), tmp_path / "dcp", rank=3)
    assert sorted(p.name for p in dcp.root.iterdir()) == [
        ".metadata",
        "__0_0.distcp",
        "__1_0.distcp",
        "__2_0.distcp",
    ]
    ds = damage.missing_rank_file(framework_units.path("deepspeed/zero2"), tmp_path / "ds", rank=1)
    assert ds.file.relative_to(ds.root) == Path("global_step4/zero_pp_rank_1_mp_rank_00_optim_states.pt")
    assert not ds.file.exists()
    assert (ds.root / "global_step2" / ds.file.name).exists()


def test_stale_optimizer(framework_units: Any, tmp_path: Path) -> None:
    newer, older = (
        framework_units.path("hf-trainer/checkpoint-4"),
        framework_units.path("hf-trainer/checkpoint-2"),
    )
    result = damage.stale_optimizer(newer, older, tmp_path / "hf")
    assert filecmp.cmp(result.file, older / "optimizer.pt", shallow=False)
    assert filecmp.cmp(result.root / "model.safetensors", newer / "model.safetensors", shallow=False)
    assert int(torch.load(result.file, weights_only=True)["state"][0]["step"]) == 2
    single = damage.stale_optimizer(
        framework_units.path("lightning/steps/step=8"),
        framework_units.path("lightning/steps/step=4"),
        tmp_path / "l",
    )
    saved = torch.load(single.root, weights_only=True)
    assert saved["global_step"] == 8
    assert int(saved["optimizer_states"][0]["state"][0]["step"]) == 4
    ds = damage.stale_optimizer(
        framework_units.path("deepspeed/zero2/global_step4"),
        framework_units.path("deepspeed/zero2/global_step2"),
        tmp_path / "ds",
    )
    assert "zero_pp_rank_0_mp_rank_00_optim_states.pt, zero_pp_rank_1_mp_rank_00_optim_states.pt" in ds.detail


def test_duplicate_unit(framework_units: Any, tmp_path: Path) -> None:
    result = damage.duplicate_unit(framework_units.path("step-folders/run"), tmp_path, "step_6", "step_8")
    assert sorted(p.name for p in result.root.iterdir()) == ["step_2", "step_4", "step_6", "step_8"]
    assert not filecmp.dircmp(result.root / "step_6", result.root / "step_8").diff_files
    assert digest(result.root / "step_6") == digest(result.file)


def test_resave_keeps_the_archive_name(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buffer)
    path = tmp_path / "x.ckpt"
    path.write_bytes(buffer.getvalue())
    damage.resave({"w": torch.zeros(2)}, path, "archive")
    assert damage.archive_name(path) == "archive"
    assert torch.equal(torch.load(path, weights_only=True)["w"], torch.zeros(2))


def test_spread_over_node_local_directories(framework_units: Any, tmp_path: Path) -> None:
    from fixtures.frameworks.node_local import spread_over_nodes, writer_rank

    assert writer_rank("bf16_zero_pp_rank_3_mp_rank_00_optim_states.pt") == 3
    assert writer_rank("zero_to_fp32.py") is None
    nodes = [tmp_path / f"node{k}" for k in range(4)]
    held = spread_over_nodes(framework_units.path("dcp/fsdp2-4ranks/step_3"), nodes, ranks_per_node=1)
    assert held == {
        nodes[0]: [".metadata", "__0_0.distcp"],
        nodes[1]: ["__1_0.distcp"],
        nodes[2]: ["__2_0.distcp"],
        nodes[3]: ["__3_0.distcp"],
    }
    ds = spread_over_nodes(framework_units.path("deepspeed/zero2/global_step4"), nodes[:2], ranks_per_node=1)
    assert ds[nodes[1]] == ["zero_pp_rank_1_mp_rank_00_optim_states.pt"]
    assert (nodes[1] / "global_step4" / "zero_pp_rank_1_mp_rank_00_optim_states.pt").exists()
