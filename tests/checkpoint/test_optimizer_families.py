"""Optimizer families from state *and* param_groups (issue 22 item 5): the Adam relations are checked only
where the family is certain. ADOPT, LaProp and the other ``pytorch-optimizer`` Adam look-alikes keep
``exp_avg``/``exp_avg_sq`` for another first moment: their healthy checkpoints are never torn or corrupt from
the Adam checks, and ``check`` says "unknown family" with the keys that made it so. torch's own Adams keep
their decisive check, and a real tear in one is still found."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from trainprobe.checkpoint.check import check_paths

torch = pytest.importorskip("torch")
pytorch_optimizer = pytest.importorskip("pytorch_optimizer")

Factory = Callable[[Iterable[Any]], Any]


def _save(path: Path, factory: Factory, steps: int = 3) -> Path:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimizer = factory(model.parameters())
        for _ in range(steps):
            optimizer.zero_grad()
            model(torch.randn(32, 8)).pow(2).mean().backward()
            optimizer.step()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": steps}, path)
    return path


def _evidence(path: Path) -> tuple[str, dict[str, list[Any]]]:
    (unit,) = check_paths([str(path)]).results
    by_check: dict[str, list[Any]] = {}
    for ev in unit.evidence:
        by_check.setdefault(ev.check, []).append(ev)
    return unit.verdict, by_check


# pytorch-optimizer classes whose state looks like Adam's (or holds more) but whose moments are not Adam's
LOOK_ALIKES = ("ADOPT", "LaProp", "AdaBelief", "AdamP", "AdaBound", "AdaMod", "Prodigy", "DAdaptAdam", "Lamb")


@pytest.mark.parametrize("name", LOOK_ALIKES)
def test_an_adam_look_alike_is_never_torn_by_the_adam_checks(tmp_path: Path, name: str) -> None:
    cls = getattr(pytorch_optimizer, name)
    lr = 1.0 if name in ("Prodigy", "DAdaptAdam") else 1e-2
    path = _save(tmp_path / f"{name}.pt", lambda p: cls(p, lr=lr))
    verdict, by_check = _evidence(path)
    assert verdict not in ("torn", "corrupt")
    for check in ("adam-bound", "exp-avg-zero", "exp-avg-sq-nonnegative"):
        assert all(ev.outcome != "fail" for ev in by_check.get(check, []))
    (family,) = by_check["optimizer-family"]
    assert family.outcome == "skip"
    assert "not know" in family.message or "unknown family" in family.message


def test_adopt_is_named_an_unknown_family_with_the_keys_that_made_it_so(tmp_path: Path) -> None:
    path = _save(tmp_path / "adopt.pt", lambda p: pytorch_optimizer.ADOPT(p, lr=1e-2))
    _verdict, by_check = _evidence(path)
    (family,) = by_check["optimizer-family"]
    assert "unknown family" in family.message
    assert {"weight_decouple", "fixed_decay"} <= set(family.values["doubt_keys"])
    assert "adam-bound" not in {ev.check for evs in by_check.values() for ev in evs if ev.outcome == "pass"}


TORCH_ADAMS: dict[str, Factory] = {
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2),
    "amsgrad": lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True),
    "nadam": lambda p: torch.optim.NAdam(p, lr=1e-2),
    "radam": lambda p: torch.optim.RAdam(p, lr=1e-2),
    "scheduled": lambda p: _scheduled(torch.optim.AdamW(p, lr=1e-2)),
}


def _scheduled(optimizer: Any) -> Any:
    torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, total_steps=10)  # adds its group keys
    return optimizer


@pytest.mark.parametrize("variant", sorted(TORCH_ADAMS))
def test_torch_adams_keep_their_decisive_check(tmp_path: Path, variant: str) -> None:
    verdict, by_check = _evidence(_save(tmp_path / f"{variant}.pt", TORCH_ADAMS[variant]))
    assert verdict == "consistent"
    (bound,) = by_check["adam-bound"]
    assert bound.outcome == "pass"
    assert "optimizer-family" not in by_check


def test_a_torn_torch_adam_is_still_torn(tmp_path: Path) -> None:
    path = _save(tmp_path / "adam.pt", TORCH_ADAMS["adam"])
    saved = torch.load(path, weights_only=True)
    for entry in saved["optimizer"]["state"].values():
        entry["exp_avg"] = entry["exp_avg"] * 50 + 1  # the first moment of another step than the second's
    torch.save(saved, path)
    verdict, by_check = _evidence(path)
    assert verdict == "torn"
    assert by_check["adam-bound"][0].outcome == "fail"


def test_a_step_counted_per_param_group_is_held_against_the_recorded_step(tmp_path: Path) -> None:
    """pytorch-optimizer keeps its step in each param group, not per parameter: a counter all the same. Equal
    to the step the file records: consistent, though the family is unknown (its checks stay skipped); the
    optimizer of two steps later under that step: torn."""
    path = _save(tmp_path / "adopt.pt", lambda p: pytorch_optimizer.ADOPT(p, lr=1e-2))
    verdict, by_check = _evidence(path)
    assert verdict == "consistent"
    (counters,) = by_check["step-counters"]
    assert "param_groups' step" in counters.message
    assert "= the checkpoint's step 3" in counters.message
    assert by_check["optimizer-family"][0].outcome == "skip"
    saved = torch.load(path, weights_only=True)
    saved["step"] = 1
    torch.save(saved, path)
    verdict, by_check = _evidence(path)
    assert verdict == "torn"
    assert "written 2 steps after the rest" in by_check["step-counters"][0].message
