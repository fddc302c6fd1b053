"""CheckpointWriter(overlap_copy=True): the parameter/optimizer copy runs beside the next forward and
backward, and a step pre-hook holds optimizer.step() until it is done.
Real torch training, CPU, real files."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from trainprobe.checkpoint.check import check_path  # noqa: E402
from trainprobe.errors import SaveError  # noqa: E402
from trainprobe.save import CheckpointWriter  # noqa: E402
from trainprobe.save.files import read_latest  # noqa: E402


class _Residual(torch.nn.Module):  # type: ignore[misc,name-defined,unused-ignore]
    def __init__(self, layers: int, width: int, norm: bool = False) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))
        self.norm = torch.nn.BatchNorm1d(width) if norm else None
        self.head = torch.nn.Linear(width, 1)
        self.scale = 1 / math.sqrt(layers)

    def forward(self, x: Any) -> Any:
        for block in self.blocks:
            x = x + torch.tanh(block(x)) * self.scale
        if self.norm is not None:
            x = self.norm(x)
        return self.head(x)


def _setup(layers: int = 4, width: int = 64, norm: bool = False) -> tuple[Any, Any]:
    torch.manual_seed(0)
    model = _Residual(layers, width, norm)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def _forward_backward(model: Any, optimizer: Any) -> None:
    x = torch.randn(8, model.head.in_features)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()


def _slow_copy(writer: CheckpointWriter, monkeypatch: pytest.MonkeyPatch, seconds: float) -> threading.Event:
    """Slow the background copy down; the returned event is set when a copy begins."""
    started = threading.Event()
    original = writer._copy_deferred

    def slow(snapshot: Any) -> None:
        started.set()
        time.sleep(seconds)  # a slow copy (the work under test), not a wait for something to happen
        original(snapshot)

    monkeypatch.setattr(writer, "_copy_deferred", slow)
    return started


def _copy_tensor_by_tensor(writer: CheckpointWriter, monkeypatch: pytest.MonkeyPatch, pause: float) -> None:
    """A copy that takes ``pause`` per tensor, so it is still running when the next step comes."""

    def slow(snapshot: Any) -> None:
        for buf, tensor in snapshot.deferred:
            buf.copy_(tensor)
            time.sleep(pause)  # a slow copy (the work under test), not a wait for something to happen

    monkeypatch.setattr(writer, "_copy_deferred", slow)


@pytest.mark.parametrize("slow", [False, True], ids=["real-copy", "copy-spans-the-step"])
def test_overlapped_saves_under_training_are_never_torn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow: bool
) -> None:
    # A save after every step. real-copy: as it runs (24x256, 6 MB per checkpoint). copy-spans-the-step:
    # each copy takes ~40 ms, far longer than forward + backward, so every next step must be held by the hook
    # or the file mixes two steps.
    model, optimizer = _setup(layers=24, width=256) if not slow else _setup(layers=8, width=64)
    saves = 30 if not slow else 15
    with CheckpointWriter(tmp_path, keep=None, overlap_copy=True) as writer:
        if slow:
            _copy_tensor_by_tensor(writer, monkeypatch, pause=0.001)
        for step in range(1, saves + 1):
            _forward_backward(model, optimizer)
            optimizer.step()
            writer.save(step, model=model, optimizer=optimizer)
        assert writer.wait() == tmp_path / f"step-{saves:08d}.pt"
    assert optimizer._optimizer_step_pre_hooks == {}  # every hook removed again
    for step in range(1, saves + 1):
        result = check_path(str(tmp_path / f"step-{step:08d}.pt"))
        assert result.verdict == "consistent", (step, result.reason)
        manifest = [e for e in result.evidence if e.check == "manifest"]
        assert [e.outcome for e in manifest] == ["pass"], (step, result.reason)
        loaded = torch.load(tmp_path / f"step-{step:08d}.pt", weights_only=True)
        assert {float(s["step"]) for s in loaded["optimizer"]["state"].values()} == {float(step)}
    last = torch.load(tmp_path / f"step-{saves:08d}.pt", weights_only=True)
    assert torch.equal(last["model"]["blocks.3.weight"], model.blocks[3].weight.detach())


def test_next_step_waits_for_the_copy_and_the_file_has_save_time_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, optimizer = _setup()
    _forward_backward(model, optimizer)
    optimizer.step()
    at_save = {k: v.clone() for k, v in model.state_dict().items()}
    exp_avg_at_save = optimizer.state[model.head.weight]["exp_avg"].clone()
    writer = CheckpointWriter(tmp_path, overlap_copy=True)
    copy_started = _slow_copy(writer, monkeypatch, seconds=0.5)
    began = time.perf_counter()
    target = writer.save(1, model=model, optimizer=optimizer)
    save_seconds = time.perf_counter() - began
    assert save_seconds < 0.3  # save() did not wait for the (slow) copy
    assert copy_started.wait(5)
    _forward_backward(model, optimizer)
    began = time.perf_counter()
    optimizer.step()  # must wait for the copy to finish
    step_seconds = time.perf_counter() - began
    writer.close()
    assert step_seconds > 0.3
    assert writer.stall_seconds[0] >= save_seconds + 0.3  # the held step counts as stall
    loaded = torch.load(target, weights_only=True)
    for key, value in at_save.items():
        assert torch.equal(loaded["model"][key], value), key
    # the held step did move the weights afterwards
    assert not torch.equal(model.blocks[0].weight.detach(), at_save["blocks.0.weight"])
    head = [id(p) for p in model.parameters()].index(id(model.head.weight))
    assert torch.equal(loaded["optimizer"]["state"][head]["exp_avg"], exp_avg_at_save)
    assert float(loaded["optimizer"]["state"][0]["step"]) == 1.0
    assert check_path(str(target)).verdict == "consistent"


def test_buffers_changed_in_forward_after_save_stay_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, optimizer = _setup(norm=True)
    _forward_backward(model, optimizer)
    optimizer.step()
    running_mean = model.norm.running_mean.clone()
    tracked = int(model.norm.num_batches_tracked)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    writer = CheckpointWriter(tmp_path, overlap_copy=True)
    _slow_copy(writer, monkeypatch, seconds=0.3)
    target = writer.save(1, model=model, optimizer=optimizer, scheduler=scheduler, epoch=[3])
    _forward_backward(model, optimizer)  # a forward in train mode updates the running statistics
    assert not torch.equal(model.norm.running_mean, running_mean)
    optimizer.param_groups[0]["lr"] = 123.0  # plain values were copied at save time as well
    optimizer.step()
    scheduler.step()
    writer.close()
    loaded = torch.load(target, weights_only=True)
    assert torch.equal(loaded["model"]["norm.running_mean"], running_mean)
    assert int(loaded["model"]["norm.num_batches_tracked"]) == tracked
    assert loaded["optimizer"]["param_groups"][0]["lr"] == pytest.approx(1e-2)
    assert loaded["scheduler"]["last_epoch"] == 0
    assert loaded["epoch"] == [3]


def test_every_optimizer_passed_is_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, optimizer = _setup()
    head = torch.nn.Linear(4, 4)
    second = torch.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
    head(torch.randn(2, 4)).sum().backward()
    second.step()
    head_at_save = head.weight.detach().clone()
    writer = CheckpointWriter(tmp_path, overlap_copy=True)
    _slow_copy(writer, monkeypatch, seconds=0.4)
    target = writer.save(1, model=model, optimizer=optimizer, head=head, head_optimizer=second)
    began = time.perf_counter()
    second.step()  # the extra optimizer is held too
    assert time.perf_counter() - began > 0.25
    writer.close()
    assert second._optimizer_step_pre_hooks == {}
    assert optimizer._optimizer_step_pre_hooks == {}
    loaded = torch.load(target, weights_only=True)
    assert torch.equal(loaded["head"]["weight"], head_at_save)
    assert not torch.equal(head.weight.detach(), head_at_save)


def test_second_save_and_wait_wait_for_the_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, optimizer = _setup()
    _forward_backward(model, optimizer)
    optimizer.step()
    writer = CheckpointWriter(tmp_path, keep=None, overlap_copy=True)
    _slow_copy(writer, monkeypatch, seconds=0.3)
    writer.save(1, model=model, optimizer=optimizer)
    began = time.perf_counter()
    writer.save(2, model=model, optimizer=optimizer)  # no step between: waits for copy 1 first
    assert time.perf_counter() - began > 0.2
    assert writer.wait() == tmp_path / "step-00000002.pt"
    assert optimizer._optimizer_step_pre_hooks == {}
    writer.close()
    for step in (1, 2):
        assert check_path(str(tmp_path / f"step-{step:08d}.pt")).verdict == "consistent"


def test_copy_failure_lets_the_step_go_and_surfaces_on_the_next_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, optimizer = _setup()
    _forward_backward(model, optimizer)
    optimizer.step()
    writer = CheckpointWriter(tmp_path, overlap_copy=True)
    writer.save(1, model=model, optimizer=optimizer)
    writer.wait()

    def broken(snapshot: Any) -> None:
        time.sleep(0.1)  # the copy fails after a while (the work under test), not a wait for an event
        raise OSError("no memory for the copy")

    monkeypatch.setattr(writer, "_copy_deferred", broken)
    writer.save(2, model=model, optimizer=optimizer)
    _forward_backward(model, optimizer)
    optimizer.step()  # not blocked forever, not raising inside the training step
    with pytest.raises(SaveError, match=r"step 2.*no memory for the copy"):
        writer.save(3, model=model, optimizer=optimizer)
    monkeypatch.undo()
    writer.save(4, model=model, optimizer=optimizer)  # reported once; the writer goes on
    writer.close()
    assert read_latest(tmp_path) == tmp_path / "step-00000004.pt"
    assert not (tmp_path / "step-00000002.pt").exists()
    assert optimizer._optimizer_step_pre_hooks == {}


def test_default_mode_copies_everything_before_save_returns(tmp_path: Path) -> None:
    model, optimizer = _setup()
    _forward_backward(model, optimizer)
    optimizer.step()
    with CheckpointWriter(tmp_path) as writer:
        target = writer.save(1, model=model, optimizer=optimizer)
        assert optimizer._optimizer_step_pre_hooks == {}  # no hook: nothing is left to copy
        assert writer._copier is None
        first = writer._pools[0]._buffers["model.blocks.0.weight"]
        assert torch.equal(first, model.blocks[0].weight.detach())
    assert check_path(str(target)).verdict == "consistent"
