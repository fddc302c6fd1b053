"""``check`` on real torch-written checkpoints: torn ones are flagged with evidence, consistent ones pass."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from trainprobe.checkpoint.check import adam_bound, check_path, check_paths  # noqa: E402
from trainprobe.demo.race import train  # noqa: E402
from trainprobe.save import CheckpointWriter  # noqa: E402


def _evidence(result: Any, check: str) -> Any:
    found = [e for e in result.evidence if e.check == check]
    assert found, f"no {check} evidence in {[e.check for e in result.evidence]}"
    return found[0]


def _trained(
    steps: int = 3, width: int = 16, betas: tuple[float, float] = (0.9, 0.999)
) -> tuple[Any, Any, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh(), torch.nn.Linear(width, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=betas, weight_decay=0.01)

    def step(zero_half: bool = False) -> None:
        x = torch.randn(8, width)
        if zero_half:
            x[:, : width // 2] = 0  # no gradient reaches those weight columns
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(steps):
        step()
    return model, opt, step


def test_adam_bound_values() -> None:
    assert adam_bound(0.9, 0.999) == pytest.approx(7.27, abs=0.01)
    assert adam_bound(0.9, 0.95) == pytest.approx(1.165, abs=0.001)
    assert adam_bound(0.99, 0.9) is None  # beta1^2 >= beta2: no finite bound


def test_consistent_checkpoint_passes_with_its_evidence(tmp_path: Path) -> None:
    model, opt, _ = _trained()
    path = tmp_path / "ok.pt"
    torch.save({"step": 3, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    result = check_path(str(path))
    assert result.verdict == "consistent", result.reason
    assert (
        "all 4 step counters equal (3 = the checkpoint's step 3)"
        in _evidence(result, "step-counters").message
    )
    assert _evidence(result, "adam-bound").outcome == "pass"
    assert _evidence(result, "container").outcome == "pass"
    assert result.step == 3


def test_counters_that_disagree_mean_torn(tmp_path: Path) -> None:
    model, opt, step = _trained()
    old = copy.deepcopy(opt.state_dict())
    step()
    mixed = opt.state_dict()
    mixed["state"][2] = old["state"][2]  # one parameter's state written before the step, the rest after
    mixed["state"][3] = old["state"][3]
    path = tmp_path / "torn.pt"
    torch.save({"model": model.state_dict(), "optimizer": mixed}, path)
    result = check_path(str(path))
    assert result.verdict == "torn"
    ev = _evidence(result, "step-counters")
    assert ev.outcome == "fail"
    assert ev.values["counters"] == {"4": 2, "3": 2}
    assert "per-parameter step counters disagree" in ev.message
    # Every parameter of each step group, and where in the write order the step fell.
    assert ev.values["groups"] == {"4": ["0.weight", "0.bias"], "3": ["2.weight", "2.bias"]}
    assert "counters read 4 up to record data/" in ev.message
    assert "the optimizer stepped while torch.save wrote optimizer.state.1.exp_avg (0.bias)" in ev.message


def test_optimizer_steps_ahead_of_the_step_field_mean_torn(tmp_path: Path) -> None:
    model, opt, step = _trained()
    weights = copy.deepcopy(model.state_dict())
    step()
    step()  # the optimizer moved on twice before its state was written
    path = tmp_path / "split.pt"
    torch.save({"step": 3, "model": weights, "optimizer": opt.state_dict()}, path)
    result = check_path(str(path))
    assert result.verdict == "torn"
    assert "all 4 step counters say 5 but the checkpoint's step is 3" in result.reason


def test_one_step_ahead_is_ambiguous(tmp_path: Path) -> None:
    # A step field counted from 0 looks exactly like a tear one step after the model was written.
    model, opt, _ = _trained()
    path = tmp_path / "zero-based.pt"
    torch.save({"step": 2, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    result = check_path(str(path))
    assert result.verdict == "unknown"
    assert "either the step field counts from 0" in result.reason
    assert check_paths([str(path)]).exit_code == 0


def test_counters_behind_the_step_field_are_not_a_tear_nor_consistent(tmp_path: Path) -> None:
    # Micro-batches counted in the step, skipped AMP steps or an older optimizer state: one file cannot tell,
    # so the model-vs-optimizer check could not decide and the unit is not called consistent.
    model, opt, _ = _trained()
    path = tmp_path / "accumulated.pt"
    torch.save({"step": 12, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    result = check_path(str(path))
    assert result.verdict == "unknown"
    assert "behind the checkpoint's step 12" in result.reason
    assert "nothing in the checkpoint tells which" in result.reason


def test_counters_behind_with_a_grad_scaler_saved_are_skipped_amp_steps(tmp_path: Path) -> None:
    model, opt, _ = _trained()
    path = tmp_path / "amp.pt"
    scaler = {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000}
    torch.save(
        {"step": 5, "model": model.state_dict(), "optimizer": opt.state_dict(), "scaler": scaler}, path
    )
    result = check_path(str(path))
    assert result.verdict == "consistent", result.reason
    assert "steps its grad scaler skipped" in _evidence(result, "step-counters").message


def test_a_writers_own_step_key_is_a_step_source(tmp_path: Path) -> None:
    # A nanoGPT-style loop records iter_num: its optimizer, written two steps after it, is a tear.
    model, opt, step = _trained()
    weights = copy.deepcopy(model.state_dict())
    step()
    step()
    path = tmp_path / "ckpt.pt"
    torch.save({"iter_num": 3, "model": weights, "optimizer": opt.state_dict(), "config": {}}, path)
    result = check_path(str(path))
    assert result.verdict == "torn"
    assert "all 4 step counters say 5 but the checkpoint's step is 3 (ckpt.pt: iter_num)" in result.reason


def test_a_number_in_a_name_is_a_label_not_a_tear(tmp_path: Path) -> None:
    # A trainer that names its files by epoch: checkpoint-0 after two optimizer steps.
    model, opt, _ = _trained(steps=2)
    path = tmp_path / "checkpoint-0.pth.tar"
    torch.save({"epoch": 0, "state_dict": model.state_dict(), "optimizer": opt.state_dict()}, path)
    result = check_path(str(path))
    assert result.verdict != "torn", result.reason
    assert result.step == 2
    note = next(e for e in result.evidence if e.check == "step-sources" and e.outcome == "note")
    assert "its name (checkpoint-0.pth.tar) says 0" in note.message
    assert "the number is its epoch" in note.message


def test_two_fields_of_one_file_are_never_a_tear(tmp_path: Path) -> None:
    model, opt, _ = _trained()
    path = tmp_path / "two.pt"
    torch.save({"step": 3, "iteration": 24, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    result = check_path(str(path))
    assert result.verdict == "consistent", result.reason
    assert any("count different things" in e.message for e in result.evidence)


def test_hf_trainer_state_supplies_the_step(tmp_path: Path) -> None:
    model, opt, step = _trained()  # 3 steps
    weights = copy.deepcopy(model.state_dict())
    step()
    step()
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 3, "epoch": 0.1}))
    torch.save(opt.state_dict(), tmp_path / "optimizer.pt")  # written two steps after the model
    torch.save(weights, tmp_path / "pytorch_model.bin")
    result = check_path(str(tmp_path / "optimizer.pt"))
    assert result.step == 3
    assert result.verdict == "torn"
    assert "all 4 step counters say 5 but the checkpoint's step is 3" in result.reason


def test_model_only_file_is_unknown(tmp_path: Path) -> None:
    model, _opt, _ = _trained(steps=1)
    path = tmp_path / "weights.pt"
    torch.save(model.state_dict(), path)
    result = check_path(str(path))
    assert result.verdict == "unknown"
    assert check_paths([str(path)]).exit_code == 0


def test_first_moment_newer_than_second_breaks_the_adam_bound(tmp_path: Path) -> None:
    model, opt, step = _trained(steps=1, betas=(0.9, 0.95))
    v_old = {i: s["exp_avg_sq"].clone() for i, s in opt.state_dict()["state"].items()}
    step()
    state = opt.state_dict()
    for i, s in state["state"].items():
        s["exp_avg_sq"] = v_old[i]  # m from step 2, v from step 1
    path = tmp_path / "mv.pt"
    torch.save({"model": model.state_dict(), "optimizer": state}, path)
    result = check_path(str(path))
    assert result.verdict == "torn"
    ev = _evidence(result, "adam-bound")
    assert ev.outcome == "fail"
    assert ev.values["worst_ratio_to_bound"] > 1.5


def test_exp_avg_without_exp_avg_sq_is_torn(tmp_path: Path) -> None:
    model, opt, step = _trained(steps=0)
    step(zero_half=True)
    v_first = {i: s["exp_avg_sq"].clone() for i, s in opt.state_dict()["state"].items()}
    step()
    state = opt.state_dict()
    for i, s in state["state"].items():
        s["exp_avg_sq"] = v_first[i]
    path = tmp_path / "zero.pt"
    torch.save({"model": model.state_dict(), "optimizer": state}, path)
    result = check_path(str(path))
    assert result.verdict == "torn"
    ev = _evidence(result, "exp-avg-zero")
    assert ev.outcome == "fail"
    assert "0.weight" in ev.tensors[0]


def test_negative_exp_avg_sq_is_corrupt(tmp_path: Path) -> None:
    model, opt, _ = _trained()
    state = opt.state_dict()
    state["state"][1]["exp_avg_sq"][0] = -1.0
    path = tmp_path / "neg.pt"
    torch.save({"model": model.state_dict(), "optimizer": state}, path)
    result = check_path(str(path))
    assert result.verdict == "corrupt"
    assert _evidence(result, "exp-avg-sq-nonnegative").outcome == "fail"


def test_state_missing_from_param_groups_is_corrupt(tmp_path: Path) -> None:
    model, opt, _ = _trained()
    state = opt.state_dict()
    state["param_groups"][0]["params"] = state["param_groups"][0]["params"][:-1]
    path = tmp_path / "groups.pt"
    torch.save({"model": model.state_dict(), "optimizer": state}, path)
    result = check_path(str(path))
    assert result.verdict == "corrupt"
    assert "belong to no param_group" in _evidence(result, "param-groups").message


def test_bf16_weights_must_be_the_cast_of_fp32_master(tmp_path: Path) -> None:
    model, _opt, _ = _trained()
    master = {k: v.clone() for k, v in model.state_dict().items()}
    low = {k: v.to(torch.bfloat16) for k, v in master.items()}
    good = tmp_path / "mixed.pt"
    torch.save({"model": low, "master": master}, good)
    result = check_path(str(good))
    assert _evidence(result, "master-weights").outcome == "pass"
    assert result.verdict == "consistent"
    master["0.weight"] += 0.01  # the master moved on a step, the bf16 copy did not
    bad = tmp_path / "mixed-torn.pt"
    torch.save({"model": low, "master": master}, bad)
    result = check_path(str(bad))
    assert result.verdict == "torn"
    assert "model.0.weight != cast of master.0.weight" in _evidence(result, "master-weights").message


def test_non_finite_values_are_reported(tmp_path: Path) -> None:
    model, opt, _ = _trained()
    sd = model.state_dict()
    sd["2.bias"][0] = float("nan")
    path = tmp_path / "nan.pt"
    torch.save({"step": 3, "model": sd, "optimizer": opt.state_dict()}, path)
    report = check_paths([str(path)])
    assert report.exit_code == 1
    assert report.results[0].nonfinite[0]["name"] == "model.2.bias"
    assert report.results[0].nonfinite[0]["nan"] == 1


def test_truncated_file_is_corrupt_and_garbage_is_unreadable(tmp_path: Path) -> None:
    model, opt, _ = _trained()
    path = tmp_path / "cut.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    path.write_bytes(path.read_bytes()[:-200])
    assert check_path(str(path)).verdict == "corrupt"
    junk = tmp_path / "notes.txt"
    junk.write_text("not a checkpoint")
    report = check_paths([str(junk)])
    assert report.results[0].verdict == "unreadable"
    assert report.exit_code == 2


def test_flipped_byte_fails_crc(tmp_path: Path) -> None:
    model, opt, _ = _trained()
    path = tmp_path / "flip.pt"
    torch.save({"step": 3, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    data = bytearray(path.read_bytes())
    at = data.index(b"data/0") + 200  # inside the first storage's bytes
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    result = check_path(str(path))
    assert result.verdict == "corrupt"
    assert "CRC32" in _evidence(result, "container").message


# -- CheckpointWriter checkpoints and their manifest -----------------------------------------------


def test_writer_checkpoint_is_consistent_and_manifest_validated(tmp_path: Path) -> None:
    model, opt, _ = _trained()
    with CheckpointWriter(tmp_path, keep=2) as writer:
        path = writer.save(3, model=model, optimizer=opt)
    result = check_path(str(path))
    assert result.verdict == "consistent"
    assert _evidence(result, "manifest").outcome == "pass"
    manifest_file = Path(str(path) + ".manifest.json")
    manifest = json.loads(manifest_file.read_text())
    manifest["step"] = 4
    manifest_file.write_text(json.dumps(manifest))
    result = check_path(str(path))
    assert result.verdict == "corrupt"
    assert "checkpoint says step 3, manifest says 4" in _evidence(result, "manifest").message


def test_writer_manifest_catches_a_changed_file(tmp_path: Path) -> None:
    model, opt, _ = _trained()
    with CheckpointWriter(tmp_path) as writer:
        path = writer.save(3, model=model, optimizer=opt)
    data = bytearray(path.read_bytes())
    data[-30] ^= 0xFF  # in the zip's central directory comment area: CRCs stay valid, sha256 does not
    path.write_bytes(bytes(data))
    result = check_path(str(path))
    assert result.verdict == "corrupt"
    assert any("sha256" in e.message or "CRC" in e.message for e in result.evidence if e.outcome == "fail")


# -- the seed's race -------------------------------------------------------------------------------


@pytest.mark.slow
def test_naive_background_save_tears_and_the_writer_does_not(tmp_path: Path) -> None:
    naive = train(tmp_path / "naive", steps=60, save_every=3, mode="background", layers=32, width=256)
    verdicts = [check_path(str(p)) for p in naive.checkpoints]
    # The race's gate makes the window certain: the loop steps while each save is half-written, so every
    # save but the last (no step after it) tears, on any machine and under any load.
    assert [r.verdict for r in verdicts] == ["torn"] * 19 + ["consistent"]
    # The evidence names the tear: per-parameter counters from two steps in one file.
    for r in verdicts[:-1]:
        assert any(e.check == "step-counters" and e.outcome == "fail" for e in r.evidence), r.evidence

    safe = train(tmp_path / "writer", steps=60, save_every=3, mode="writer", layers=32, width=256)
    report = check_paths([str(tmp_path / "writer" / "ckpt")])
    assert len(report.results) == len(safe.checkpoints) == 20
    assert {r.verdict for r in report.results} == {"consistent"}
    assert all(_evidence(r, "manifest").outcome == "pass" for r in report.results)
