"""A unit without a part its framework's save always writes — a Trainer's ``checkpoint-N/`` without its model,
without ``optimizer.pt`` beside ``scheduler.pt``, without ``trainer_state.json``; an
``Accelerator.save_state`` folder without its model or optimizer — is corrupt: every file left reads clean,
yet the framework's own resume refuses it or silently goes on with a fresh optimizer or step. Real units
written by transformers and accelerate (tests/fixtures/frameworks), a copy each with one file removed; files
whose loss the resume shrugs off (an RNG state, training_args.bin, config.json) keep the unit healthy."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from trainprobe.checkpoint import scan
from trainprobe.checkpoint.check import check_paths

HF = "hf-trainer/checkpoint-4"
ACCELERATE = "accelerate/checkpoint_1"


def _copy_without(framework_units: Any, name: str, tmp_path: Path, removed: str) -> Path:
    copy = tmp_path / Path(name).name
    shutil.copytree(framework_units.path(name), copy)
    (copy / removed).unlink()
    return copy


def _verdicts(path: Path) -> tuple[str, str, str]:
    (checked,) = check_paths([str(path)]).to_json()["units"]
    failed = " | ".join(e["message"] for e in checked["evidence"] if e["outcome"] == "fail")
    (scanned,) = scan([str(path)]).to_json()["units"]
    return checked["verdict"], scanned["verdict"], failed


@pytest.mark.parametrize(
    ("name", "removed", "words"),
    [
        (HF, "model.safetensors", "no weights file: every hf-trainer save writes one"),
        (HF, "optimizer.pt", "no optimizer file (it has rng, scheduler)"),
        (HF, "trainer_state.json", "no trainer_state.json (it has optimizer, rng, scheduler)"),
        (ACCELERATE, "model.safetensors", "no weights file: every accelerate save writes one"),
        (ACCELERATE, "optimizer.bin", "no optimizer file (it has scheduler)"),
    ],
)
def test_a_part_the_save_always_writes_missing_is_corrupt(
    framework_units: Any, tmp_path: Path, name: str, removed: str, words: str
) -> None:
    checked, scanned, why = _verdicts(_copy_without(framework_units, name, tmp_path, removed))
    assert (checked, scanned) == ("corrupt", "corrupt"), why
    assert words in why


@pytest.mark.parametrize(
    ("name", "removed"),
    [
        (HF, "rng_state.pth"),
        (HF, "training_args.bin"),
        (HF, "config.json"),
        (ACCELERATE, "random_states_0.pkl"),
    ],
)
def test_a_part_the_resume_does_without_keeps_the_unit_healthy(
    framework_units: Any, tmp_path: Path, name: str, removed: str
) -> None:
    checked, scanned, why = _verdicts(_copy_without(framework_units, name, tmp_path, removed))
    assert checked in ("consistent", "unknown"), why
    assert scanned == "clean"


def test_a_model_a_save_hook_wrote_in_a_sub_folder_counts(framework_units: Any, tmp_path: Path) -> None:
    """diffusers' training scripts save the model with save_pretrained into ``unet/`` of the accelerate folder
    (and pop it from what accelerate saves): no model file at the top, and the unit is healthy."""
    copy = _copy_without(framework_units, ACCELERATE, tmp_path, "model.safetensors")
    shutil.copytree(framework_units.path("diffusers-unet/unet"), copy / "unet")
    units = {u["path"]: u for u in check_paths([str(copy)]).to_json()["units"]}
    assert units[str(copy)]["verdict"] in ("consistent", "unknown"), units[str(copy)]["evidence"]
