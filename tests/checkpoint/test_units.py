"""Checkpoints as the frameworks lay them out: one unit, one verdict, files under it (issue 10).

The layouts are built here with torch the way each framework writes them (file names, objects, step fields);
the real-framework fixtures (tests/fixtures/frameworks) add the same assertions on files the frameworks wrote.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trainprobe.checkpoint import scan
from trainprobe.checkpoint.check import check_paths
from trainprobe.checkpoint.diff import diff_paths
from trainprobe.checkpoint.units.discover import discover_units

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")


def _train(steps: int, optimizer: str = "adamw") -> tuple[Any, Any, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    opt = {
        "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2),
        "sgd": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9),
        "adagrad": lambda p: torch.optim.Adagrad(p, lr=1e-2),
        "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-2),
        "adafactor": lambda p: torch.optim.Adafactor(p, lr=1e-2),
    }[optimizer](model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    for _ in range(steps):
        model(torch.randn(3, 4)).pow(2).mean().backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    return model, opt, sched


def _training_args_bin(path: Path) -> None:
    """What training_args.bin pickles: a TrainingArguments rebuilt by NEWOBJ + BUILD, with an enum."""
    import zipfile

    def text(v: str) -> bytes:
        raw = v.encode()
        return b"X" + len(raw).to_bytes(4, "little") + raw

    enum = text("transformers.trainer_utils") + text("IntervalStrategy") + b"\x93(" + text("steps") + b"tR"
    obj = text("transformers.training_args") + text("TrainingArguments") + b"\x93)\x81}("
    obj += text("output_dir") + text("out") + text("save_strategy") + enum + b"ub."
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("training_args/data.pkl", b"\x80\x04" + obj)


def hf_checkpoint(root: Path, step: int = 6, *, optimizer_step: int | None = None) -> Path:
    """A Trainer checkpoint-N/ as transformers writes it (optimizer.pt from ``optimizer_step`` if given)."""
    model, opt, sched = _train(step)
    folder = root / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    safetensors_torch.save_file(sd, str(folder / "model.safetensors"), metadata={"format": "pt"})
    stale = _train(optimizer_step)[1] if optimizer_step is not None else opt
    torch.save(stale.state_dict(), folder / "optimizer.pt")
    torch.save(sched.state_dict(), folder / "scheduler.pt")
    torch.save(
        {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.random.get_rng_state()},
        folder / "rng_state.pth",
    )
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    (folder / "config.json").write_text("{}")
    _training_args_bin(folder / "training_args.bin")
    return folder


def lightning_ckpt(path: Path, step: int = 6) -> Path:
    model, opt, sched = _train(step)
    torch.save(
        {
            "epoch": 0,
            "global_step": step,
            "pytorch-lightning_version": "2.4.0",
            "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
            "loops": {"fit_loop": {"epoch_progress": {"total": {"completed": 0}}}},
            "callbacks": {
                "ModelCheckpoint{'monitor': 'val_loss'}": {
                    "best_model_score": torch.tensor(float("inf")),
                    "kth_value": torch.tensor(float("inf")),
                    "best_model_path": "",
                },
                "EarlyStopping{'monitor': 'val_loss'}": {"best_score": torch.tensor(float("inf"))},
            },
            "optimizer_states": [opt.state_dict()],
            "lr_schedulers": [sched.state_dict()],
            "hyper_parameters": {"lr": 0.01},
        },
        path,
    )
    return path


def deepspeed_tag(root: Path, step: int = 6) -> Path:
    model, opt, _ = _train(step)
    tag = root / f"global_step{step}"
    tag.mkdir(parents=True)
    torch.save(
        {"module": model.state_dict(), "global_steps": step, "optimizer": None, "ds_version": "0.15.0"},
        tag / "mp_rank_00_model_states.pt",
    )
    flat = {
        k: torch.cat([s[k].reshape(-1) for s in opt.state_dict()["state"].values()])
        for k in ("exp_avg", "exp_avg_sq")
    }
    state = {0: {"step": torch.tensor(float(step)), **flat}}
    groups = [{**opt.state_dict()["param_groups"][0], "params": [0]}]
    torch.save(
        {
            "optimizer_state_dict": {
                "base_optimizer_state": {"state": state, "param_groups": groups},
                "single_partition_of_fp32_groups": [torch.cat([p.reshape(-1) for p in model.parameters()])],
                "zero_stage": 2,
            },
            "ds_version": "0.15.0",
        },
        tag / "zero_pp_rank_0_mp_rank_00_optim_states.pt",
    )
    (root / "latest").write_text(f"global_step{step}")
    return tag


def test_an_hf_trainer_checkpoint_is_one_clean_unit(tmp_path: Path) -> None:
    folder = hf_checkpoint(tmp_path / "out")
    report = scan([str(tmp_path / "out")])
    (unit,) = report.units
    assert (unit.path, unit.framework, unit.verdict) == (str(folder), "hf-trainer", "clean")
    roles = {Path(f.path).name: f.role for f in unit.files}
    assert roles == {
        "model.safetensors": "weights",
        "optimizer.pt": "optimizer",
        "rng_state.pth": "rng",
        "scheduler.pt": "scheduler",
        "training_args.bin": "config",
    }
    notes = [n for f in unit.files for n in f.notes]
    assert {n.kind for n in notes} == {"pickled-class"}  # TrainingArguments: a note, never suspicious
    assert (unit.step, unit.step_source) == (6, "trainer_state.json")
    assert report.exit_code == 0

    checked = check_paths([str(tmp_path / "out")])
    (result,) = checked.results
    assert result.verdict == "consistent", result.reason
    sources = next(e for e in result.evidence if e.check == "step-sources")
    assert sources.outcome == "pass"
    assert "trainer_state.json says 6" in sources.message
    assert "scheduler.pt: last_epoch says 6" in sources.message
    assert any(e.file == "optimizer.pt" and e.check == "adam-bound" for e in result.evidence)
    assert checked.exit_code == 0


def test_a_stale_optimizer_in_an_hf_checkpoint_is_torn(tmp_path: Path) -> None:
    hf_checkpoint(tmp_path, optimizer_step=4)
    (result,) = check_paths([str(tmp_path)]).results
    assert result.verdict == "torn"
    assert "stale optimizer file" in result.reason


def test_a_scheduler_from_another_save_is_torn(tmp_path: Path) -> None:
    folder = hf_checkpoint(tmp_path)
    torch.save(_train(4)[2].state_dict(), folder / "scheduler.pt")
    (result,) = check_paths([str(folder)]).results
    assert result.verdict == "torn"
    assert "name different steps" in result.reason


def test_nan_in_one_exp_avg_sq_condemns_the_unit_not_a_file(tmp_path: Path) -> None:
    folder = hf_checkpoint(tmp_path)
    opt = torch.load(folder / "optimizer.pt")
    opt["state"][0]["exp_avg_sq"][0, 0] = float("nan")
    torch.save(opt, folder / "optimizer.pt")
    report = scan([str(tmp_path)])
    (unit,) = report.units
    assert unit.verdict == "nonfinite"
    assert report.exit_code == 1
    (result,) = check_paths([str(tmp_path)]).results
    assert result.verdict == "nonfinite"


def test_lightning_placeholders_are_notes_not_findings(tmp_path: Path) -> None:
    path = lightning_ckpt(tmp_path / "epoch=0-step=6.ckpt")
    report = scan([str(path)])
    (unit,) = report.units
    assert unit.framework == "lightning"
    assert unit.verdict == "clean"
    assert report.exit_code == 0
    notes = [n.message for n in unit.files[0].notes if n.kind == "metadata-nonfinite"]
    assert len(notes) == 3
    assert any("kth_value holds 1 +Inf" in n for n in notes)
    (result,) = check_paths([str(path)]).results
    assert result.verdict == "consistent", result.reason
    assert result.step == 6


def test_a_deepspeed_tag_is_one_unit(tmp_path: Path) -> None:
    tag = deepspeed_tag(tmp_path / "out")
    (unit,) = discover_units([str(tmp_path / "out")])
    assert (unit.path, unit.framework) == (str(tag), "deepspeed")
    assert sorted(Path(p.path).name for p in unit.parts) == [
        "mp_rank_00_model_states.pt",
        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
    ]
    report = scan([str(tmp_path / "out")])
    assert report.units[0].verdict == "clean"
    (result,) = check_paths([str(tag)]).results
    assert result.verdict == "consistent", result.reason
    assert result.step == 6


def test_a_plain_folder_of_model_and_optimizer_is_one_unit(tmp_path: Path) -> None:
    model, opt, _ = _train(3)
    folder = tmp_path / "step_3"
    folder.mkdir()
    torch.save(model.state_dict(), folder / "model.pt")
    torch.save(opt.state_dict(), folder / "optimizer.pt")
    (unit,) = discover_units([str(tmp_path)])
    assert (unit.path, unit.framework) == (str(folder), "folder")
    (result,) = check_paths([str(tmp_path)]).results
    assert result.step == 3
    # nothing records the model's step: a tear between model.pt and optimizer.pt would not show
    assert result.verdict == "unknown", result.reason
    assert "a tear between model weights and optimizer state would not show" in result.reason


def test_accelerate_save_state_names_count_saves(tmp_path: Path) -> None:
    model, opt, sched = _train(5)
    folder = tmp_path / "checkpoints" / "checkpoint_0"
    folder.mkdir(parents=True)
    safetensors_torch.save_file(model.state_dict(), str(folder / "model.safetensors"))
    torch.save(opt.state_dict(), folder / "optimizer.bin")
    torch.save(sched.state_dict(), folder / "scheduler.bin")
    torch.save({"step": 0, "random_state": random.getstate()}, folder / "random_states_0.pkl")
    (unit,) = discover_units([str(tmp_path)])
    assert unit.framework == "accelerate"
    (result,) = check_paths([str(tmp_path)]).results
    name = next(s for s in result.step_sources if s["source"] == "name")
    assert name["counts"] == "saves"  # checkpoint_0 is the first save, not step 0
    assert result.verdict in ("consistent", "unknown")


def test_identical_units_are_found(tmp_path: Path) -> None:
    first = hf_checkpoint(tmp_path)
    shutil.copytree(first, tmp_path / "checkpoint-7")
    report = scan([str(tmp_path)])
    paths = {u.path: u.identical_to for u in report.units}
    assert paths[str(first)] == [str(tmp_path / "checkpoint-7")]


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad", "rmsprop", "adafactor"])
def test_other_optimizers_are_never_corrupt(tmp_path: Path, optimizer: str) -> None:
    model, opt, _ = _train(3, optimizer)
    path = tmp_path / "ckpt.pt"
    torch.save({"step": 3, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    (result,) = check_paths([str(path)]).results
    assert result.verdict in ("consistent", "unknown"), result.reason
    fails = [e for e in result.evidence if e.outcome == "fail"]
    assert fails == []
    if optimizer == "sgd":
        assert "SGD momentum state" in result.reason


def test_an_unknown_optimizer_is_unknown_not_corrupt(tmp_path: Path) -> None:
    model, _opt, _ = _train(1)
    state = {i: {"moment": torch.ones(3), "weird": torch.ones(2, 2)} for i in range(4)}
    opt = {"state": state, "param_groups": [{"lr": 0.1, "params": [0, 1, 2, 3]}]}
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt}, path)
    (result,) = check_paths([str(path)]).results
    assert result.verdict == "unknown"
    assert any(e.check == "optimizer-family" and e.outcome == "skip" for e in result.evidence)


def test_diff_of_two_hf_units_and_nan_never_breaks(tmp_path: Path) -> None:
    a = hf_checkpoint(tmp_path / "a", 4)
    b = hf_checkpoint(tmp_path / "b", 6)
    report = diff_paths(str(a), str(b))
    names = {t.name for t in report.tensors}
    assert "model.safetensors/0.weight" in names
    assert "optimizer.pt/state.0.exp_avg" in names
    assert report.exit_code == 0

    x, y = tmp_path / "x.pt", tmp_path / "y.pt"
    torch.save({"w": torch.tensor([1.0, float("nan"), 3.0])}, x)
    torch.save({"w": torch.tensor([1.5, 2.0, float("inf")])}, y)
    report = diff_paths(str(x), str(y))
    (w,) = report.tensors
    assert (w.status, w.nonfinite_a, w.nonfinite_b) == ("changed", 1, 1)
    assert w.max_abs_diff == pytest.approx(0.5)  # over the elements finite in both
    json.dumps(report.to_json(), allow_nan=False)


def test_bf16_updates_below_resolution_are_a_note(tmp_path: Path) -> None:
    model, opt, _ = _train(1)
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    torch.save(
        {
            "model": {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()},
            "optimizer": opt.state_dict(),
        },
        a,
    )
    # A real step whose update did not change any bf16 value (its counters advance and its moments move,
    # as a step's do: counters advanced over unchanged moments would be a state no step gives).
    for group in opt.param_groups:
        group["lr"] = 1e-12
    model(torch.randn(3, 4)).pow(2).mean().backward()
    opt.step()
    low = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    torch.save({"model": low, "optimizer": opt.state_dict()}, b)
    report = diff_paths(str(a), str(b))
    assert report.step_without_weights == []
    assert report.below_resolution
    assert "below bfloat16's resolution" in report.below_resolution[0]
    assert report.exit_code == 0


def test_framework_marks_without_checkpoint_data_are_no_unit(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoint-3"
    folder.mkdir()
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 3}))
    (unit,) = discover_units([str(tmp_path)])
    assert unit.problem == "no checkpoint found in this directory"
    assert scan([str(tmp_path)]).exit_code == 2  # nothing read is never reported healthy


def test_an_optimizer_saved_for_another_model_does_not_fit(tmp_path: Path) -> None:
    folder = hf_checkpoint(tmp_path)
    (result,) = check_paths([str(folder)]).results
    assert next(e for e in result.evidence if e.check == "optimizer-covers-model").outcome == "pass"
    torch.manual_seed(0)
    other = torch.nn.Linear(5, 7)
    opt = torch.optim.AdamW(other.parameters())
    other(torch.randn(2, 5)).sum().backward()
    opt.step()
    torch.save(opt.state_dict(), folder / "optimizer.pt")
    (result,) = check_paths([str(folder)]).results
    fit = next(e for e in result.evidence if e.check == "optimizer-covers-model")
    assert fit.outcome == "fail"
    assert result.verdict in ("corrupt", "torn")
