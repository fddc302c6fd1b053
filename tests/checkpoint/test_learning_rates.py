"""The learning rate a unit records twice (a scheduler's last rate, its optimizer's group rate) as evidence of
one moment, and the step fields of the JSON files a save writes beside its weights (issue 22, rule 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainprobe.checkpoint import scan
from trainprobe.checkpoint.check import check_paths

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")


def _epochs(epochs: int, steps: int = 3) -> dict[str, Any]:
    """A torchvision-reference-style training dict after ``epochs`` epochs: AdamW stepping per batch, StepLR
    per epoch, the epoch recorded (no optimizer step)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(epochs):
        for _ in range(steps):
            model(torch.randn(3, 4)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
        sched.step()
    return {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "lr_scheduler": sched.state_dict(),
        "epoch": epochs - 1,
    }


def _evidence(result: Any, check: str) -> list[Any]:
    return [e for e in result.evidence if e.check == check]


def test_a_scheduler_whose_last_rate_is_its_optimizers_is_one_moment(tmp_path: Path) -> None:
    path = tmp_path / "model_1.pth"
    torch.save(_epochs(2), path)
    (result,) = check_paths([str(path)]).results
    assert result.verdict == "unknown", result.reason  # no optimizer step recorded beside the weights
    (lr,) = _evidence(result, "scheduler-lr")
    assert lr.outcome == "pass"
    assert "0.0025" in lr.message


def test_an_optimizer_from_an_earlier_epoch_is_torn_by_its_learning_rate(tmp_path: Path) -> None:
    saved = _epochs(2)
    saved["optimizer"] = _epochs(1)["optimizer"]  # what a stale optimizer entry leaves
    path = tmp_path / "model_1.pth"
    torch.save(saved, path)
    (result,) = check_paths([str(path)]).results
    assert result.verdict == "torn"
    assert "set lr 0.0025 but model_1.pth: optimizer's param group 0 holds lr 0.005" in result.reason
    (unit,) = scan([str(path)]).units
    assert unit.verdict == "torn"


def test_a_scheduler_file_from_another_moment_than_the_optimizer_file_is_torn(tmp_path: Path) -> None:
    folder = tmp_path / "step_6"
    folder.mkdir()
    new, old = _epochs(2), _epochs(1)
    torch.save(new["model"], folder / "model.pt")
    torch.save(new["optimizer"], folder / "optimizer.pt")
    torch.save(old["lr_scheduler"], folder / "scheduler.pt")
    (result,) = check_paths([str(folder)]).results
    assert result.verdict == "torn", result.reason
    (lr,) = _evidence(result, "scheduler-lr")
    assert "scheduler.pt" in lr.message
    assert "optimizer.pt" in lr.message


def test_two_optimizers_and_two_schedulers_are_not_paired_by_guess(tmp_path: Path) -> None:
    """Which scheduler drives which optimizer is not saved: skipped with the reason, never torn."""
    a, b = _epochs(2), _epochs(1)
    saved = {
        "state_dict": a["model"],
        "optimizer_states": [a["optimizer"], b["optimizer"]],
        "lr_schedulers": [b["lr_scheduler"], a["lr_scheduler"]],
        "global_step": 9,  # Lightning counts the steps of both (6 + 3)
    }
    path = tmp_path / "two.pt"
    torch.save(saved, path)
    (result,) = check_paths([str(path)]).results
    assert result.verdict != "torn", result.reason
    (lr,) = _evidence(result, "scheduler-lr")
    assert lr.outcome == "skip"
    assert "not saved" in lr.message


def test_the_step_a_json_file_beside_the_weights_records_is_a_step_source(tmp_path: Path) -> None:
    """diffusers' EMAModel.save_pretrained writes its optimization_step into the model's config.json; a
    config's other numbers (a hyperparameter named like a count) are not read."""
    folder = tmp_path / "unet_ema"
    folder.mkdir()
    safetensors_torch.save_file({"w": torch.ones(2, 2)}, str(folder / "diffusion_pytorch_model.safetensors"))
    config = {"_class_name": "UNet2DModel", "optimization_step": 3, "num_steps": 1000, "decay": 0.9999}
    (folder / "config.json").write_text(json.dumps(config))
    (checked,) = check_paths([str(folder)]).results
    (scanned,) = scan([str(folder)]).units
    assert checked.step == scanned.step == 3
    assert [s["where"] for s in checked.step_sources] == ["config.json: optimization_step"]
