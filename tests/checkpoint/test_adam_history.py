"""Adam moments against their step counters (issue 23 item 2), on real torch AdamW states from real
``optimizer.step()`` calls: a healthy N-step state fits its counters; a state re-initialised and stepped once
under counters of N is torn (moments at one step from zero: |m|/sqrt(v) = (1-b1)/sqrt(1-b2) everywhere);
moments that are zero because the gradients were zero, or one step from zero because a layer sat behind a
zero-initialised one, are notes, never torn; where the check cannot run it is a skip that says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from trainprobe.checkpoint.check import check_paths  # noqa: E402

STEPS = 40


def _model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(6, 16),
        torch.nn.Tanh(),
        torch.nn.Linear(16, 8),
        torch.nn.Tanh(),
        torch.nn.Linear(8, 1),
    )


def _train(model: Any, optimizer: Any, steps: int, unused: Any = None) -> None:
    """``steps`` real AdamW steps; ``unused`` (a parameter outside the forward) gets an exactly zero gradient
    each step, as DDP gives an unused parameter."""
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(16, 6)).pow(2).mean().backward()
        if unused is not None:
            unused.grad = torch.zeros_like(unused)
        optimizer.step()


def _save(path: Path, model: Any, optimizer: Any, step: int, extra: Any = None) -> Path:
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
    if extra is not None:
        state["model"]["unused"] = extra.detach()
    torch.save(state, path)
    return path


def _reinitialised(path: Path, zero_grads: int = 0) -> Path:
    """A healthy run of STEPS steps whose optimizer is then replaced by a fresh one, stepped once, with its
    counters set back to STEPS (the first ``zero_grads`` parameters get exactly zero gradients in that
    step)."""
    model = _model()
    _train(model, torch.optim.AdamW(model.parameters(), lr=1e-2), STEPS)
    fresh = torch.optim.AdamW(model.parameters(), lr=1e-2)
    fresh.zero_grad()
    model(torch.randn(16, 6)).pow(2).mean().backward()
    for p in list(model.parameters())[:zero_grads]:
        p.grad = torch.zeros_like(p)
    fresh.step()
    saved = fresh.state_dict()
    for entry in saved["state"].values():
        entry["step"] = torch.tensor(float(STEPS))
    torch.save({"model": model.state_dict(), "optimizer": saved, "step": STEPS}, path)
    return path


def _moments(path: Path) -> tuple[str, list[Any]]:
    (unit,) = check_paths([str(path)]).results
    return unit.verdict, [e for e in unit.evidence if e.check == "moments-vs-counter"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; sys.argv[0] = 'trainprobe'; from trainprobe.cli import main; sys.exit(main())"
    env = {**os.environ, "COLUMNS": "400"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)


def test_a_healthy_n_step_adamw_state_fits_its_counters(tmp_path: Path) -> None:
    model = _model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    _train(model, optimizer, STEPS)
    verdict, (moments,) = _moments(_save(tmp_path / "healthy.pt", model, optimizer, STEPS))
    assert verdict == "consistent"
    assert moments.outcome == "pass"
    assert f"6 Adam state pair(s) with counters at {STEPS}" in moments.message


def test_a_reinitialised_state_under_later_counters_is_torn_in_the_terminal_and_the_json(
    tmp_path: Path,
) -> None:
    path = _reinitialised(tmp_path / "reinit.pt")
    shown = _cli("check", str(path))
    assert shown.returncode == 1
    assert "✗ TORN" in shown.stdout
    assert "FAIL moments-vs-counter" in shown.stdout
    assert f"the moments are a fresh optimizer's while the step counters say {STEPS}" in shown.stdout
    assert "6 at one step from zero (|exp_avg|/sqrt(exp_avg_sq) = (1−β1)/sqrt(1−β2) = 3.16" in shown.stdout
    document = _cli("check", "--json", str(path))
    assert document.returncode == 1
    (unit,) = json.loads(document.stdout)["units"]
    assert unit["verdict"] == "torn"
    (moments,) = [e for e in unit["evidence"] if e["check"] == "moments-vs-counter"]
    assert moments["outcome"] == "fail"
    assert moments["indicates"] == "torn"
    assert moments["values"]["counter"] == STEPS
    assert len(moments["values"]["one_step"]) == 6
    assert moments["values"]["zero"] == []
    # Every other check passes: only this one sees it (counters equal the step, the Adam bound holds).
    others = [e for e in unit["evidence"] if e["check"] != "moments-vs-counter"]
    assert all(e["outcome"] != "fail" for e in others)


def test_zero_and_one_step_moments_together_under_later_counters_are_torn(tmp_path: Path) -> None:
    # The story of issue 23: some parameters' moments are zero, the rest one step from zero, counters N.
    verdict, (moments,) = _moments(_reinitialised(tmp_path / "mixed.pt", zero_grads=4))
    assert verdict == "torn"
    assert "2 at one step from zero" in moments.message
    assert "4 with exp_avg and exp_avg_sq zero in every element" in moments.message
    assert len(moments.values["zero"]) == 4


def test_zero_moments_from_zero_gradients_are_a_note_not_a_tear(tmp_path: Path) -> None:
    model = _model()
    unused = torch.nn.Parameter(torch.randn(5, 3))
    optimizer = torch.optim.AdamW([*model.parameters(), unused], lr=1e-2)
    _train(model, optimizer, STEPS, unused=unused)
    verdict, (moments,) = _moments(_save(tmp_path / "unused.pt", model, optimizer, STEPS, unused))
    assert verdict == "consistent"
    assert moments.outcome == "note"
    assert "1 with exp_avg and exp_avg_sq zero in every element" in moments.message
    assert "exactly zero" in moments.message


def test_a_layer_behind_a_zero_initialised_one_at_step_2_is_a_note_not_a_tear(tmp_path: Path) -> None:
    # LoRA's shape: B starts at zero, so A's first gradient is exactly zero and A is one step from zero at
    # step 2 — while B has a history, so this is no fresh optimizer.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4, bias=False), torch.nn.Linear(4, 6, bias=False))
    torch.nn.init.zeros_(model[1].weight)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(2):
        optimizer.zero_grad()
        x = torch.randn(16, 6)
        (model(x) - x.flip(1)).pow(2).mean().backward()
        optimizer.step()
    verdict, (moments,) = _moments(_save(tmp_path / "lora.pt", model, optimizer, 2))
    assert verdict == "consistent"
    assert moments.outcome == "note"
    assert "1 at one step from zero" in moments.message
    assert "0.weight" in moments.message


def test_one_step_at_counter_one_is_what_it_should_be(tmp_path: Path) -> None:
    model = _model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    _train(model, optimizer, 1)
    verdict, (moments,) = _moments(_save(tmp_path / "first.pt", model, optimizer, 1))
    assert verdict == "consistent"
    assert moments.outcome == "skip"
    assert "at most 1 step" in moments.message


def test_without_betas_the_check_is_skipped_with_why(tmp_path: Path) -> None:
    path = _reinitialised(tmp_path / "reinit.pt")
    saved = torch.load(path, weights_only=True)
    for group in saved["optimizer"]["param_groups"]:
        del group["betas"]
    torch.save(saved, path)
    verdict, (moments,) = _moments(path)
    assert verdict != "torn"
    assert moments.outcome == "skip"
    assert "no betas in its param_group" in moments.message


def test_an_optimizer_family_not_known_for_certain_is_skipped_with_why(tmp_path: Path) -> None:
    path = _reinitialised(tmp_path / "reinit.pt")
    saved = torch.load(path, weights_only=True)
    for group in saved["optimizer"]["param_groups"]:
        group["centralize_gradients"] = True  # a key no Adam writer sets: another first moment may be kept
    torch.save(saved, path)
    verdict, (moments,) = _moments(path)
    assert verdict != "torn"
    assert moments.outcome == "skip"
    assert "not known for certain" in moments.message


def test_8bit_moments_are_skipped_with_why(tmp_path: Path) -> None:
    codes = {
        "state1": torch.zeros(64, dtype=torch.uint8),
        "state2": torch.zeros(64, dtype=torch.uint8),
        "absmax1": torch.ones(1),
        "absmax2": torch.ones(1),
        "qmap1": torch.linspace(-1, 1, 256),
        "qmap2": torch.linspace(0, 1, 256),
        "step": STEPS,
    }
    optimizer = {"state": {0: codes}, "param_groups": [{"params": [0], "lr": 1e-3, "betas": (0.9, 0.999)}]}
    path = tmp_path / "adam8bit.pt"
    torch.save({"model": {"w": torch.zeros(8, 8)}, "optimizer": optimizer, "step": STEPS}, path)
    _verdict, (moments,) = _moments(path)
    assert moments.outcome == "skip"
    assert "quantized codes" in moments.message
