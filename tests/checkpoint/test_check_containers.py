"""Container evidence for ``check``: DCP chunk coverage and shard files, HF index entries."""

from __future__ import annotations

import json
import pickle
import warnings
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from trainprobe.checkpoint.check import check_path  # noqa: E402


def _dcp(path: Path) -> Path:
    import torch.distributed.checkpoint as dcp

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "torch.distributed is disabled ... saving without a process group"
        dcp.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": 1}, checkpoint_id=str(path))
    return path


def _rewrite_chunks(path: Path, fqn: str, chunks: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> None:
    """Replace one tensor's chunk list in .metadata, through torch's own metadata classes."""
    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata

    meta_file = path / ".metadata"
    with open(meta_file, "rb") as fh:
        meta: Any = pickle.load(fh)  # our own file, written just now by torch
    meta.state_dict_metadata[fqn].chunks = [
        ChunkStorageMetadata(offsets=torch.Size(o), sizes=torch.Size(s)) for o, s in chunks
    ]
    with open(meta_file, "wb") as fh:
        pickle.dump(meta, fh)


def _evidence(result: Any, check: str) -> Any:
    return next(e for e in result.evidence if e.check == check)


def test_dcp_checkpoint_is_consistent_with_full_coverage(tmp_path: Path) -> None:
    result = check_path(str(_dcp(tmp_path / "dcp")))
    assert result.verdict == "consistent", result.reason
    assert _evidence(result, "dcp-coverage").outcome == "pass"
    assert _evidence(result, "step-counters").values["counter"] == 1.0


def test_dcp_hole_in_a_tensor_is_corrupt(tmp_path: Path) -> None:
    path = _dcp(tmp_path / "dcp")
    _rewrite_chunks(path, "model.weight", [((0, 0), (2, 4))])  # the chunk of row 2 is gone
    result = check_path(str(path))
    assert result.verdict == "corrupt"
    ev = _evidence(result, "dcp-coverage")
    assert "model.weight: chunks cover 8 of 12 elements" in ev.message


def test_dcp_overlapping_chunks_are_corrupt(tmp_path: Path) -> None:
    path = _dcp(tmp_path / "dcp")
    _rewrite_chunks(path, "model.weight", [((0, 0), (2, 4)), ((1, 0), (2, 4))])
    result = check_path(str(path))
    assert result.verdict == "corrupt"
    assert (
        "model.weight: chunks at [0, 0] and [1, 0] overlap"
        in _evidence(result, "dcp-coverage").values["problems"]
    )


def test_dcp_missing_shard_file_is_corrupt(tmp_path: Path) -> None:
    path = _dcp(tmp_path / "dcp")
    for shard in path.glob("*.distcp"):
        shard.unlink()
    result = check_path(str(path))
    assert result.verdict == "corrupt"
    assert "data file __0_0.distcp" in _evidence(result, "dcp-coverage").message


def test_hf_index_with_a_missing_shard_is_corrupt(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    save_file({"a.weight": torch.ones(2, 2)}, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file({"b.weight": torch.ones(2, 2)}, str(tmp_path / "model-00002-of-00002.safetensors"))
    index = {
        "metadata": {"total_size": 32},
        "weight_map": {
            "a.weight": "model-00001-of-00002.safetensors",
            "b.weight": "model-00002-of-00002.safetensors",
        },
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    result = check_path(str(tmp_path / "model.safetensors.index.json"))
    assert result.verdict == "unknown"  # weights only: nothing torn can show, but the container is whole
    assert _evidence(result, "hf-index").outcome == "pass"
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    result = check_path(str(tmp_path / "model.safetensors.index.json"))
    assert result.verdict == "corrupt"
    assert "shard model-00002-of-00002.safetensors" in result.reason
