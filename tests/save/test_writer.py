"""CheckpointWriter with real torch and real files: consistent snapshots, atomic files, rotation, errors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from trainprobe.errors import SaveError  # noqa: E402
from trainprobe.save import CheckpointWriter  # noqa: E402
from trainprobe.save.files import manifest_path, read_latest  # noqa: E402


def _model_and_optimizer(width: int = 32) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh(), torch.nn.Linear(width, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return model, optimizer


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    x = torch.randn(4, model[0].in_features)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def test_save_writes_checkpoint_manifest_and_latest(tmp_path: Path) -> None:
    model, optimizer = _model_and_optimizer()
    _step(model, optimizer)
    with CheckpointWriter(tmp_path, keep=3) as writer:
        target = writer.save(1, model=model, optimizer=optimizer, note="hello")
        assert writer.wait() == target
    assert read_latest(tmp_path) == tmp_path / "step-00000001.pt"
    manifest = json.loads(manifest_path(target).read_text())
    assert manifest["step"] == 1
    assert manifest["file"] == "step-00000001.pt"
    assert manifest["sha256"] == hashlib.sha256(target.read_bytes()).hexdigest()
    assert manifest["bytes"] == target.stat().st_size
    assert manifest["all_finite"] is True
    assert manifest["tensors"]["model.0.weight"] == {"dtype": "float32", "shape": [32, 32], "finite": True}
    assert manifest["tensors"]["optimizer.state.0.exp_avg"]["finite"] is True
    loaded = torch.load(target, weights_only=True)
    assert loaded["step"] == 1
    assert loaded["note"] == "hello"
    assert torch.equal(loaded["model"]["0.weight"], model[0].weight.detach())
    assert float(loaded["optimizer"]["state"][0]["step"]) == 1.0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_snapshot_is_taken_before_save_returns(tmp_path: Path) -> None:
    # Big enough that the background write is still running when the tensors change under it.
    weight = torch.nn.Parameter(torch.zeros(4096, 1024))
    optimizer = torch.optim.SGD([weight], lr=1.0, momentum=0.9)
    weight.grad = torch.ones_like(weight)
    optimizer.step()
    expected = weight.detach().clone()
    with CheckpointWriter(tmp_path) as writer:
        target = writer.save(1, model={"weight": weight}, optimizer=optimizer)
        for _ in range(5):
            optimizer.step()  # mutates weight and momentum in place while the file is written
    loaded = torch.load(target, weights_only=True)
    assert torch.equal(loaded["model"]["weight"], expected)
    assert torch.equal(loaded["optimizer"]["state"][0]["momentum_buffer"], torch.ones(4096, 1024))


def test_keep_rotates_old_checkpoints(tmp_path: Path) -> None:
    model, optimizer = _model_and_optimizer()
    writer = CheckpointWriter(tmp_path, keep=2)
    for step in range(1, 6):
        _step(model, optimizer)
        writer.save(step, model=model, optimizer=optimizer)
    writer.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "latest",
        "step-00000004.pt",
        "step-00000004.pt.manifest.json",
        "step-00000005.pt",
        "step-00000005.pt.manifest.json",
    ]
    assert read_latest(tmp_path) == tmp_path / "step-00000005.pt"


def test_buffers_are_reused_between_saves(tmp_path: Path) -> None:
    model, optimizer = _model_and_optimizer()
    _step(model, optimizer)
    with CheckpointWriter(tmp_path, buffers=1) as writer:
        writer.save(1, model=model, optimizer=optimizer)
        first = dict(writer._pools[0]._buffers)
        _step(model, optimizer)
        writer.save(2, model=model, optimizer=optimizer)
        second = writer._pools[0]._buffers
    assert [k for k in first if k.startswith("optimizer.")]
    assert all(second[k] is first[k] for k in first)
    loaded = torch.load(tmp_path / "step-00000002.pt", weights_only=True)
    assert float(loaded["optimizer"]["state"][0]["step"]) == 2.0


def test_two_buffer_sets_alternate_and_never_mix(tmp_path: Path) -> None:
    model, optimizer = _model_and_optimizer()
    with CheckpointWriter(tmp_path, buffers=2, keep=None) as writer:
        for step in range(1, 6):
            _step(model, optimizer)
            writer.save(step, model=model, optimizer=optimizer)
        assert writer._pools[0]._buffers.keys() == writer._pools[1]._buffers.keys()
    for step in range(1, 6):
        loaded = torch.load(tmp_path / f"step-{step:08d}.pt", weights_only=True)
        assert {float(s["step"]) for s in loaded["optimizer"]["state"].values()} == {float(step)}


def test_background_failure_surfaces_as_save_error_on_next_call(tmp_path: Path) -> None:
    model, optimizer = _model_and_optimizer()
    writer = CheckpointWriter(tmp_path)
    writer.save(1, model=model, optimizer=optimizer)
    writer.wait()
    writer.save(2, model=model, optimizer=optimizer, hook=lambda: None)  # a lambda cannot be pickled
    with pytest.raises(SaveError, match="step 2") as info:
        writer.wait()
    assert "previous checkpoint" in str(info.value)
    assert info.value.exit_code == 1
    # Nothing half-written is visible and the previous checkpoint is still the latest.
    assert read_latest(tmp_path) == tmp_path / "step-00000001.pt"
    assert not (tmp_path / "step-00000002.pt").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    writer.save(3, model=model, optimizer=optimizer)  # the error was reported once; the writer goes on
    writer.close()
    assert read_latest(tmp_path) == tmp_path / "step-00000003.pt"


def test_manifest_marks_non_finite_tensors(tmp_path: Path) -> None:
    model, _optimizer = _model_and_optimizer()
    with torch.no_grad():
        model[0].bias[3] = float("nan")
    with CheckpointWriter(tmp_path) as writer:
        target = writer.save(7, model=model)
    manifest = json.loads(manifest_path(target).read_text())
    assert manifest["all_finite"] is False
    assert manifest["tensors"]["model.0.bias"]["finite"] is False
    assert manifest["tensors"]["model.0.weight"]["finite"] is True


def test_tied_weights_stay_tied(tmp_path: Path) -> None:
    shared = torch.randn(8, 8)
    with CheckpointWriter(tmp_path) as writer:
        target = writer.save(1, model={"embed": shared, "head": shared})
    loaded = torch.load(target, weights_only=True)
    assert loaded["model"]["embed"].data_ptr() == loaded["model"]["head"].data_ptr()


def test_stale_temp_files_from_dead_writers_are_removed(tmp_path: Path) -> None:
    stale = tmp_path / ".step-00000009.pt.tmp-999999999"
    stale.write_bytes(b"half a checkpoint")
    CheckpointWriter(tmp_path).close()
    assert not stale.exists()


def test_keep_must_be_positive(tmp_path: Path) -> None:
    from trainprobe.errors import UsageError

    with pytest.raises(UsageError, match="keep must be at least 1"):
        CheckpointWriter(tmp_path, keep=0)
