"""The real frameworks load the fixtures back, so they are known healthy: Trainer resumes, Lightning resumes,
accelerate restores its state, DeepSpeed consolidates its partitions, DCP reassembles every rank's chunks, and
every optimizer resumes from its saved state (each in its own subprocess, like the generators)."""

from __future__ import annotations

from typing import Any

import pytest

from fixtures.frameworks.build import load_back

pytestmark = pytest.mark.slow


def facts_of(framework_units: Any, generator: str) -> dict[str, Any]:
    status = framework_units.generator_status(generator)
    if status["status"] == "missing":
        pytest.skip(f"{generator} needs {', '.join(status['missing'])}")
    return load_back(generator, framework_units.root)


def test_trainer_resumes_from_the_newest_checkpoint(framework_units: Any) -> None:
    facts = facts_of(framework_units, "hf-trainer")
    assert facts["resumed_global_step"] == 6
    assert facts["sharded_equals_last_checkpoint"]


def test_lightning_resumes_from_last_ckpt(framework_units: Any) -> None:
    facts = facts_of(framework_units, "lightning")
    assert facts["hparams"] == {"lr": 0.01, "hidden": 16}
    assert facts["resumed_epoch"] == 4
    assert facts["resumed_global_step"] == 16


def test_accelerate_load_state(framework_units: Any) -> None:
    facts = facts_of(framework_units, "accelerate")
    assert facts == {"custom_step": 4, "optimizer_step": 4, "scheduler_last_epoch": 4}


def test_deepspeed_consolidates_the_partitions(framework_units: Any) -> None:
    """The fp32 weights rebuilt from the partitions equal the module weights (bf16 runs: their cast)."""
    facts = facts_of(framework_units, "deepspeed")
    assert set(facts) == {"zero1", "zero2", "zero1-bf16", "zero2-bf16"}
    for stage in facts:
        assert facts[stage]["latest"] == "global_step4"
        assert facts[stage]["consolidated_equals_module"]
        assert facts[stage]["global_steps"] == 4
        assert facts[stage]["client_state"] == {"my_step": 4}


def test_dcp_reassembles_every_rank(framework_units: Any) -> None:
    facts = facts_of(framework_units, "dcp")
    assert set(facts) == {"ddp/step_2", "ddp/step_4", "fsdp2/step_2", "fsdp2/step_4", "fsdp2-4ranks/step_3"}
    for name, unit in facts.items():
        step = int(name.rsplit("_", 1)[1])
        assert unit["train_state"] == {"step": step}
        assert unit["optimizer_step"] == step
        assert unit["optimizer_state_keys"] == unit["model_keys"]
    assert facts["ddp/step_4"]["dcp_load_equals"]


@pytest.mark.parametrize(
    "generator", ["torch-optimizers", "hf-adafactor", "lion", "bnb-8bit", "step-folders"]
)
def test_optimizers_resume(framework_units: Any, generator: str) -> None:
    facts = facts_of(framework_units, generator)
    assert facts
    if generator == "step-folders":
        assert facts == {f"step_{s}": {"optimizer_step": s} for s in (2, 4, 6)}
    else:
        assert all(entry == {"step": 3, "resumed": True} for entry in facts.values())


def test_torch_formats_load(framework_units: Any) -> None:
    facts = facts_of(framework_units, "torch-formats")
    assert facts["torchscript_matches"]
    assert facts["whole_module_matches"]
    assert facts["custom_module_matches"]
    assert facts["quantized_qscheme"] == "torch.per_channel_affine"
