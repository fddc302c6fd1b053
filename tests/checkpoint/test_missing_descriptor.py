"""A checkpoint whose descriptor file is gone — the ``*.index.json`` of a Hugging Face sharded save, the
``.metadata`` of a torch.distributed.checkpoint directory — is corrupt: every tensor of its shards still
reads, but its own loader cannot load it. Real units written by transformers and torch.distributed.checkpoint
(tests/fixtures/frameworks), a copy each with the descriptor removed; the intact units stay healthy."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from trainprobe.checkpoint import scan
from trainprobe.checkpoint.check import check_paths


def _copy_without(framework_units: Any, name: str, tmp_path: Path, descriptor: str) -> Path:
    copy = tmp_path / Path(name).name
    shutil.copytree(framework_units.path(name), copy)
    (copy / descriptor).unlink()
    return copy


def _verdicts(path: Path) -> tuple[set[str], set[str], str]:
    checked = check_paths([str(path)]).to_json()["units"]
    failed = " | ".join(e["message"] for u in checked for e in u["evidence"] if e["outcome"] == "fail")
    scanned = {u["verdict"] for u in scan([str(path)]).to_json()["units"]}
    return {u["verdict"] for u in checked}, scanned, failed


@pytest.mark.parametrize("name", ["hf-trainer/sharded", "dcp/ddp/step_2"])
def test_the_intact_unit_is_healthy(framework_units: Any, name: str) -> None:
    checked, scanned, _why = _verdicts(framework_units.path(name))
    assert checked <= {"consistent", "unknown"}
    assert scanned == {"clean"}


def test_shards_without_their_index_are_corrupt(framework_units: Any, tmp_path: Path) -> None:
    copy = _copy_without(framework_units, "hf-trainer/sharded", tmp_path, "model.safetensors.index.json")
    checked, scanned, why = _verdicts(copy)
    assert (checked, scanned) == ({"corrupt"}, {"corrupt"})
    assert "4 shard(s) of a sharded save of 4" in why
    assert "*.index.json" in why


def test_dcp_data_files_without_metadata_are_corrupt(framework_units: Any, tmp_path: Path) -> None:
    copy = _copy_without(framework_units, "dcp/ddp/step_2", tmp_path, ".metadata")
    checked, scanned, why = _verdicts(copy)
    assert (checked, scanned) == ({"corrupt"}, {"corrupt"})
    assert "has no .metadata" in why
