"""``diff`` on real torch-written checkpoints of one training run."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from trainprobe.checkpoint.diff import diff_paths  # noqa: E402


class _Net(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.encoder = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 1)
        self.unused = torch.nn.Linear(8, 8)  # the optimizer steps it on zero gradients; it never moves

    def forward(self, x: Any) -> Any:
        return self.head(torch.tanh(self.encoder(x)))


def _run() -> tuple[Any, Any, Any]:
    torch.manual_seed(0)
    model = _Net()
    model.encoder.bias.requires_grad_(False)  # frozen: no state, never moves
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)  # the frozen bias gets no grad, so no state

    def step() -> None:
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.unused.parameters():
            p.grad = torch.zeros_like(p)
        opt.step()

    return model, opt, step


def _by_name(report: Any) -> dict[str, Any]:
    return {t.name: t for t in report.tensors}


def test_two_checkpoints_of_one_run(tmp_path: Path) -> None:
    model, opt, step = _run()
    step()
    a = tmp_path / "a.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, a)
    before = model.head.weight.detach().clone()
    step()
    b = tmp_path / "b.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, b)
    report = diff_paths(str(a), str(b))
    tensors = _by_name(report)
    head = tensors["model.head.weight"]
    assert head.status == "changed"
    delta = (model.head.weight.detach() - before).double()
    assert head.rel_change == pytest.approx(float(delta.norm() / before.double().norm()), rel=1e-6)
    assert head.max_abs_diff == pytest.approx(float(delta.abs().max()), rel=1e-6)
    assert tensors["model.encoder.bias"].status == "identical"
    assert "model.encoder.bias" in report.frozen
    assert report.steps == (1.0, 2.0)
    assert any("model.unused.weight" in line for line in report.step_without_weights)
    assert report.weights_without_step == []
    assert report.exit_code == 1
    summary = {m.prefix: m for m in report.modules()}
    assert summary["model.encoder"].identical == 1
    assert summary["model.encoder"].changed == 1
    js = report.to_json()
    assert js["schema_version"] == 3
    assert js["same_run"]["step_moved_weights_did_not"]


def test_weights_newer_than_optimizer_state(tmp_path: Path) -> None:
    model, opt, step = _run()
    step()
    a = tmp_path / "a.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, a)
    stale = copy.deepcopy(opt.state_dict())
    step()
    b = tmp_path / "b.pt"
    torch.save({"model": model.state_dict(), "optimizer": stale}, b)  # the optimizer state of the step before
    report = diff_paths(str(a), str(b))
    assert any("model.head.weight" in line and "step stays 1" in line for line in report.weights_without_step)


def test_added_removed_reshaped_and_retyped(tmp_path: Path) -> None:
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    torch.save(
        {"keep": torch.ones(3), "gone": torch.ones(2), "grow": torch.ones(2), "cast": torch.ones(2)}, a
    )
    torch.save(
        {"keep": torch.ones(3), "new": torch.ones(2), "grow": torch.ones(3), "cast": torch.ones(2).half()}, b
    )
    tensors = _by_name(diff_paths(str(a), str(b)))
    assert tensors["keep"].status == "identical"
    assert tensors["keep"].rel_change == 0.0
    assert tensors["gone"].status == "removed"
    assert tensors["new"].status == "added"
    assert tensors["grow"].status == "shape-changed"
    assert tensors["grow"].other_shape == [3]
    assert tensors["cast"].status == "dtype-changed"
    assert tensors["cast"].other_dtype == "float16"


def test_bfloat16_and_nan_compare_by_value(tmp_path: Path) -> None:
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    x = torch.tensor([1.0, float("nan"), 3.0])
    torch.save({"w": x.to(torch.bfloat16), "n": x}, a)
    torch.save({"w": (x + 1).to(torch.bfloat16), "n": x.clone()}, b)
    tensors = _by_name(diff_paths(str(a), str(b)))
    assert tensors["n"].status == "identical"  # NaN in the same place is not a change
    assert tensors["w"].status == "changed"


def test_two_runs_with_other_optimizer_settings_are_not_called_torn(tmp_path: Path) -> None:
    paths = []
    for name, optimizer in (("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW)):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        opt = optimizer(model.parameters(), lr=1e-2)
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
        paths.append(tmp_path / f"{name}.pt")
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, paths[-1])
    report = diff_paths(*map(str, paths))  # both at step 3, the weights apart: two runs, not a torn save
    assert report.weights_without_step == []
    assert report.exit_code == 0
    (note,) = [n.message for n in report.notes if n.kind == "not-one-run"]
    assert note.startswith("the optimizer settings differ (")
    assert "weight_decay 0 -> 0.01" in note


def _adam_states(steps: tuple[int, int]) -> tuple[dict[str, Any], dict[str, Any]]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    saved = []
    for i in range(1, max(steps) + 1):
        opt.zero_grad()
        model(torch.randn(3, 4)).pow(2).mean().backward()
        opt.step()
        if i in steps:
            saved.append(copy.deepcopy(opt.state_dict()))
    return saved[0], saved[1]


def test_two_consecutive_optimizer_files_of_a_healthy_run_are_not_torn(tmp_path: Path) -> None:
    # accelerate's save_state folders are numbered by save (checkpoint_0, checkpoint_1): the folder's
    # number is a label, and an optimizer file alone holds no weights to hold its steps against.
    first, second = _adam_states((3, 6))
    for i, state in enumerate((first, second)):
        (tmp_path / f"checkpoint_{i}").mkdir()
        torch.save(state, tmp_path / f"checkpoint_{i}" / "optimizer.bin")
    report = diff_paths(
        str(tmp_path / "checkpoint_0/optimizer.bin"), str(tmp_path / "checkpoint_1/optimizer.bin")
    )
    assert report.verdict == "clean", report.to_json()["units"]
    assert any(
        n.kind == "same-run-not-run" and "optimizer state but no weights" in n.message for n in report.notes
    )


def test_tied_embeddings_are_mapped_and_a_tear_found(tmp_path: Path) -> None:
    # One parameter under two names: model.state_dict() holds it twice, the optimizer once.
    class Tied(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(10, 4)
            self.mid = torch.nn.Linear(4, 4)
            self.head = torch.nn.Linear(4, 10, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, x: Any) -> Any:
            return self.head(torch.tanh(self.mid(self.embed(x))))

    torch.manual_seed(0)
    model = Tied()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step() -> None:
        opt.zero_grad()
        model(torch.randint(0, 10, (6,))).pow(2).mean().backward()
        opt.step()

    step()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, tmp_path / "a.pt")
    weights = copy.deepcopy(model.state_dict())
    step()  # a torn save: the optimizer stepped, the weights written are the old ones
    torch.save({"model": weights, "optimizer": opt.state_dict()}, tmp_path / "b.pt")
    report = diff_paths(str(tmp_path / "a.pt"), str(tmp_path / "b.pt"))
    # the tied weight is one parameter, under its first name, as model.parameters() yields it
    assert "model.embed.weight (step 1 -> 2, weights identical)" in report.step_without_weights
    assert report.verdict == "torn"
    assert not [n for n in report.notes if n.kind == "same-run-not-run"]


def test_each_side_shows_checks_verdict(tmp_path: Path) -> None:
    """Issue 23: where diff shows a unit's verdict it is check's (one rule), not scan's "clean": a unit whose
    optimizer counters disagree (a save that raced a step) is torn on its side, and so is the diff."""
    from trainprobe.checkpoint.check import check_paths

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(2, 4)).pow(2).mean().backward()
        opt.step()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 3}, tmp_path / "a.pt")
    torn = {"model": model.state_dict(), "optimizer": copy.deepcopy(opt.state_dict()), "step": 3}
    torn["optimizer"]["state"][0]["step"] = torch.tensor(4.0)  # one parameter's state written a step later
    torch.save(torn, tmp_path / "b.pt")
    document = diff_paths(str(tmp_path / "a.pt"), str(tmp_path / "b.pt")).to_json()
    checked = {
        r.path: r.verdict for r in check_paths([str(tmp_path / "a.pt"), str(tmp_path / "b.pt")]).results
    }
    assert (
        (document["units"]["a"]["verdict"], document["units"]["b"]["verdict"])
        == (
            checked[str(tmp_path / "a.pt")],
            checked[str(tmp_path / "b.pt")],
        )
        == ("consistent", "torn")
    )
    assert document["verdict"] == "torn"
    assert document["exit_code"] == 1
