"""DeepSpeed ZeRO-3 (issue 22 item 6): one model-states and one optimizer partition per rank
(``zero_pp_rank_R_mp_rank_MM_…``). A real ZeRO-3 checkpoint (2 ranks, CPU, deepspeed as pinned) is checked
whole; deleting any rank's file of any partition scheme DeepSpeed uses (:data:`PARTITION_SCHEMES`) makes it
corrupt, with the missing file named, never clean or consistent."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from trainprobe.checkpoint import scan
from trainprobe.checkpoint.check import check_paths
from trainprobe.checkpoint.units.frameworks.deepspeed import PARTITION_SCHEMES

HEALTHY = "zero3/zero3/global_step4"


def _zero(path: Path) -> tuple[str, Any]:
    (result,) = check_paths([str(path)]).results
    return result.verdict, next(e for e in result.evidence if e.check == "zero-partitions")


def test_a_healthy_zero3_checkpoint_is_covered(framework_units: Any) -> None:
    verdict, zero = _zero(framework_units.path(HEALTHY))
    assert verdict == "consistent"
    assert zero.outcome == "pass"
    assert "all 2 ranks' ZeRO-3 model-states and optimizer partitions" in zero.message
    assert "all 244 elements of the 6 parameters" in zero.message


@pytest.mark.parametrize("scheme", PARTITION_SCHEMES, ids=lambda s: s.holds)
def test_a_deleted_rank_partition_of_every_scheme_is_corrupt(
    framework_units: Any, tmp_path: Path, scheme: Any
) -> None:
    unit = tmp_path / "global_step4"
    shutil.copytree(framework_units.path(HEALTHY), unit)
    gone = scheme.file_name("", 1, 0)
    (unit / gone).unlink()
    verdict, zero = _zero(unit)
    assert verdict == "corrupt"
    assert zero.outcome == "fail"
    assert zero.message.startswith(f"{gone} missing")
    assert zero.values["missing"] == [gone]
    assert scan([str(unit)]).units[0].verdict == "corrupt"


def test_a_zero3_tag_without_its_model_states_is_corrupt(framework_units: Any, tmp_path: Path) -> None:
    unit = tmp_path / "global_step4"
    shutil.copytree(framework_units.path(HEALTHY), unit)
    for states in unit.glob("*_model_states.pt"):
        states.unlink()
    verdict, zero = _zero(unit)
    assert verdict == "corrupt"
    assert zero.message.startswith("no model-states file beside the 2 ZeRO partition(s)")


def test_a_zero3_partition_with_the_wrong_share_is_corrupt(framework_units: Any, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    unit = tmp_path / "global_step4"
    shutil.copytree(framework_units.path(HEALTHY), unit)
    partition = unit / "zero_pp_rank_1_mp_rank_00_optim_states.pt"
    saved = torch.load(partition, weights_only=False)
    groups = saved["optimizer_state_dict"]["fp32_flat_groups"]
    groups[0] = groups[0][:-10].clone()  # a partition cut short: its last parameter's share is gone
    torch.save(saved, partition)
    verdict, zero = _zero(unit)
    assert verdict == "corrupt"
    assert "do not hold their share" in zero.message
    assert "[112] elements where the model states need [122]" in zero.message
