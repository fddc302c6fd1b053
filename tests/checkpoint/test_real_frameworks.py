"""``scan``, ``check`` and ``diff`` on checkpoints the real frameworks wrote (tests/fixtures/frameworks: HF
Trainer, Lightning, accelerate, DeepSpeed ZeRO-1/2, DCP with DDP and FSDP2, TorchScript, a dozen optimizers).

Every healthy unit is one unit with the right verdict and the step the framework was at, taken from the
right source; every damaged copy (tests/fixtures/frameworks/damage.py) is found and named — the tensor, the
file, the step disagreement, the duplicate — with the same verdict and exit code from scan, check and diff
(one rule, trainprobe.checkpoint.verdict).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fixtures.frameworks import damage
from fixtures.frameworks.catalog import GENERATORS
from trainprobe.checkpoint import scan
from trainprobe.checkpoint.check import check_paths
from trainprobe.checkpoint.diff import diff_paths
from trainprobe.checkpoint.scanning.report import UnitReport
from trainprobe.checkpoint.units.discover import discover_units
from trainprobe.checkpoint.verdict import exit_code

pytest.importorskip("torch")

#: the unit framework trainprobe must see, by generator
FRAMEWORK = {
    "hf-trainer": "hf-trainer",
    "lightning": "lightning",
    "accelerate": "accelerate",
    "deepspeed": "deepspeed",
    "dcp": "dcp",
    "step-folders": "folder",
}
#: where each generator's units state their step (accelerate's checkpoint_<i> counts saves: the optimizer's
#: counters say the step; a step folder's name is the step its loop saved at)
STEP_SOURCE = {
    "hf-trainer": "trainer_state.json",
    "lightning": "step field",
    "accelerate": "step field",  # the loop's state it registered (custom_checkpoint_0.pkl: {"step": N})
    "deepspeed": "step field",
    "dcp": "step field",
    "step-folders": "optimizer counters",  # what the unit records comes before its name (a label)
    "torch-optimizers": "step field",
    "hf-adafactor": "step field",
    "lion": "step field",
    "bnb-8bit": "step field",
}
#: healthy units one unit cannot judge consistent: no optimizer state, none kept, or no step counter
UNKNOWN = {
    "torch-formats/torchscript",
    "torch-formats/quantized",
    "torch-formats/whole-module",
    "torch-optimizers/sgd",
    "torch-optimizers/sgd-momentum",
    "lion/lion",
    "hf-trainer/sharded",
    # model.pt beside optimizer.pt and no step recorded: a tear between the two would not show
    "step-folders/step_2",
    "step-folders/step_4",
    "step-folders/step_6",
}
SUSPICIOUS = {"torch-formats/whole-module-custom"}  # a user's own class: torch.load would run its code


def _units(framework_units: Any, generator: str) -> list[Any]:
    status = framework_units.generator_status(generator)
    if status["status"] == "missing":
        pytest.skip(f"{generator} needs {', '.join(status['missing'])}")
    names = [n for n in framework_units.names() if n.startswith(f"{generator}/")]
    return [framework_units.unit(n) for n in names]


def _one(report_units: list[Any], path: Path) -> Any:
    (unit,) = report_units
    assert Path(unit.path) == path
    return unit


@pytest.mark.parametrize("generator", [g.name for g in GENERATORS])
def test_every_healthy_unit_is_one_unit_with_its_verdict_and_step(
    framework_units: Any, generator: str
) -> None:
    for u in _units(framework_units, generator):
        if u.kind == "run":
            continue
        path = framework_units.path(u.name)
        scanned = scan([str(path)])
        checked = check_paths([str(path)])
        s, c = _one(scanned.units, path), _one(checked.results, path)
        if u.name in SUSPICIOUS:
            assert (s.verdict, c.verdict, scanned.exit_code, checked.exit_code) == ("suspicious",) * 2 + (
                1,
                1,
            )
            continue
        assert s.verdict == "clean", (u.name, [e.message for e in s.evidence], [f.error for f in s.files])
        assert c.verdict == ("unknown" if u.name in UNKNOWN else "consistent"), (u.name, c.reason)
        assert scanned.exit_code == checked.exit_code == 0, u.name
        if generator in FRAMEWORK:
            expected = "hf-model" if u.framework == "hf-model" else FRAMEWORK[generator]  # a saved model
            assert s.framework == c.framework == expected, u.name
        assert s.step == c.step == u.step, (u.name, s.step_sources)
        if u.step is not None:
            assert s.step_source == c.step_source == STEP_SOURCE[generator], (u.name, s.step_sources)


@pytest.mark.parametrize(
    "generator", ["hf-trainer", "lightning", "accelerate", "deepspeed", "dcp", "step-folders"]
)
def test_a_run_directory_holds_one_unit_per_checkpoint(framework_units: Any, generator: str) -> None:
    units = _units(framework_units, generator)
    for run in (u for u in units if u.kind == "run"):
        inside = {
            str(framework_units.path(u.name))
            for u in units
            if u.kind != "run" and u.path.startswith(run.path + "/")
        }
        found = discover_units([str(framework_units.path(run.name))])
        assert {x.path for x in found} == inside, run.name
        assert {x.framework for x in found} <= {FRAMEWORK[generator], "file"}, run.name
        if generator != "lightning":  # a Lightning .ckpt is a file, recognised by its content when read
            assert {x.framework for x in found} == {FRAMEWORK[generator]}


def test_training_args_bin_is_only_notes(framework_units: Any) -> None:
    for name in ("hf-trainer/checkpoint-2", "hf-trainer/checkpoint-4"):
        unit = scan([str(framework_units.path(name))]).units[0]
        args = next(f for f in unit.files if f.path.endswith("training_args.bin"))
        assert args.verdict == "clean"
        assert {n.kind for n in args.notes} == {"pickled-class"}
        assert any("TrainingArguments" in n.message for n in args.notes)
        assert not any(n.kind == "suspicious-global" for f in unit.files for n in f.notes)


def test_lightning_inf_placeholders_are_notes_and_exit_0(framework_units: Any) -> None:
    run = framework_units.path("lightning/run")
    report = scan([str(run)])
    assert report.exit_code == 0
    assert {u.verdict for u in report.units} == {"clean"}
    for u in report.units:
        notes = [n.message for f in u.files for n in f.notes if n.kind == "metadata-nonfinite"]
        assert any("kth_value holds 1 +Inf" in n for n in notes), u.path  # the step callback's, forever
        assert u.nonfinite == 0
    assert check_paths([str(run)]).exit_code == 0


def test_lightning_last_ckpt_is_noted_as_a_copy_not_a_finding(framework_units: Any) -> None:
    best = framework_units.path("lightning/run") / "best"
    report = scan([str(best)])
    last = next(u for u in report.units if u.path.endswith("last.ckpt"))
    assert [Path(p).name for p in last.identical_to] == ["epoch=1-step=8-val_loss=0.955.ckpt"]
    assert last.verdict == "clean"


def test_fsdp2_adam_checks_run_on_chunked_state(framework_units: Any) -> None:
    for name in ("dcp/fsdp2/step_4", "dcp/fsdp2-4ranks/step_3"):
        (result,) = check_paths([str(framework_units.path(name))]).results
        passed = {e.check: e.message for e in result.evidence if e.outcome == "pass"}
        for check in (
            "exp-avg-sq-nonnegative",
            "exp-avg-zero",
            "adam-bound",
            "dcp-coverage",
            "step-counters",
        ):
            assert check in passed, (name, check)
        assert "Adam state pairs" in passed["adam-bound"]


def test_the_optimizer_covers_every_parameter(framework_units: Any) -> None:
    for name in (
        "hf-trainer/checkpoint-4",
        "step-folders/step_4",
        "accelerate/checkpoint_1",
        "dcp/fsdp2/step_4",
    ):
        (result,) = check_paths([str(framework_units.path(name))]).results
        cover = [e for e in result.evidence if e.check == "optimizer-covers-model"]
        assert [e.outcome for e in cover] == ["pass"], (name, [e.message for e in cover])
    (ds,) = check_paths([str(framework_units.path("deepspeed/zero2/global_step4"))]).results
    zero = next(e for e in ds.evidence if e.check == "zero-partitions")
    assert zero.outcome == "pass"
    assert "cover all 244 elements of the 6 parameters" in zero.message


def test_the_scheduler_is_compared_with_the_optimizer_where_it_counts_steps(framework_units: Any) -> None:
    (hf,) = check_paths([str(framework_units.path("hf-trainer/checkpoint-4"))]).results
    assert [e.outcome for e in hf.evidence if e.check == "scheduler-steps"] == ["pass"]
    (lit,) = check_paths([str(framework_units.path("lightning/steps/step=4"))]).results
    skipped = [e for e in lit.evidence if e.check == "scheduler-steps"]
    assert [e.outcome for e in skipped] == ["skip"]
    assert "counts epochs" in skipped[0].message


# -- damaged copies ---------------------------------------------------------------------------------


def _agree(path: Path, healthy: Path | None = None) -> tuple[UnitReport, Any, Any]:
    """scan, check and (against ``healthy``) diff of ``path``: one verdict and one exit code for it."""
    scanned = scan([str(path)])
    (unit,) = [u for u in scanned.units if Path(u.path) == path]
    (result,) = [r for r in check_paths([str(path)]).results if Path(r.path) == path]
    assert unit.verdict == result.verdict, (unit.verdict, result.verdict, result.reason)
    diffed = None
    if healthy is not None:
        diffed = diff_paths(str(healthy), str(path))
        assert diffed.units[1] is not None
        assert diffed.units[1].verdict == unit.verdict
        assert diffed.verdict == unit.verdict
        assert diffed.exit_code == exit_code([unit.verdict])
    return unit, result, diffed


NAN_IN_EXP_AVG_SQ = [
    ("hf-trainer/checkpoint-4", 0),
    ("lightning/steps/step=4", 0),
    ("accelerate/checkpoint_1", 0),
    ("step-folders/step_4", 0),
    ("deepspeed/zero2/global_step4", 1),
    ("dcp/fsdp2-4ranks/step_3", 2),
    ("torch-optimizers/adam", 0),
]


@pytest.mark.parametrize(("name", "rank"), NAN_IN_EXP_AVG_SQ)
def test_a_nan_in_one_exp_avg_sq_is_named_by_tensor_and_file(
    framework_units: Any, tmp_path: Path, name: str, rank: int
) -> None:
    healthy = framework_units.path(name)
    hurt = damage.nan_in_exp_avg_sq(healthy, tmp_path, rank=rank)
    unit, result, diffed = _agree(hurt.root, healthy)
    assert unit.verdict == "nonfinite"
    bad = [(f, t) for f in unit.files for t in f.bad_tensors]
    assert len(bad) == 1, bad
    file, tensor = bad[0]
    assert (tensor.nan, tensor.posinf, tensor.neginf) == (1, 0, 0)
    assert tensor.name == hurt.tensor or tensor.name.startswith(f"{hurt.tensor}@"), tensor.name
    assert Path(tensor.file or file.path) == hurt.file  # a DCP chunk names its rank file
    assert [e["name"] for e in result.nonfinite] == [tensor.name]
    assert diffed is not None
    assert [b["name"] for b in diffed.to_json()["units"]["b"]["nonfinite"]] == [tensor.name]


@pytest.mark.parametrize(
    ("name", "file"),
    [
        ("hf-trainer/checkpoint-4", "optimizer.pt"),
        ("hf-trainer/checkpoint-4", "model.safetensors"),
        ("dcp/ddp/step_4", "__0_0.distcp"),
        ("lightning/steps/step=6", None),
    ],
)
def test_a_truncated_file_is_corrupt_and_says_where(
    framework_units: Any, tmp_path: Path, name: str, file: str | None
) -> None:
    healthy = framework_units.path(name)
    hurt = damage.truncate(healthy, tmp_path, file)
    unit, _result, diffed = _agree(hurt.root, healthy)
    assert unit.verdict == "corrupt"
    errors = [f.error for f in unit.files if f.error]
    assert errors, unit.files
    assert "truncated" in errors[0]
    if file is None or not file.endswith(".distcp"):
        kept = hurt.file.stat().st_size
        assert f"truncated at byte {kept:,}" in errors[0], errors[0]
    else:
        assert file in errors[0]
    assert diffed is not None
    assert "b" in diffed.not_compared


def test_a_missing_shard_is_named(framework_units: Any, tmp_path: Path) -> None:
    healthy = framework_units.path("hf-trainer/sharded")
    hurt = damage.missing_shard(healthy, tmp_path)
    unit, _result, _diffed = _agree(hurt.root, healthy)
    assert unit.verdict == "corrupt"
    assert any(hurt.file.name in (f.error or "") for f in unit.files)


def test_a_deleted_dcp_rank_file_is_named(framework_units: Any, tmp_path: Path) -> None:
    healthy = framework_units.path("dcp/fsdp2-4ranks/step_3")
    hurt = damage.missing_rank_file(healthy, tmp_path, rank=3)
    unit, result, _diffed = _agree(hurt.root, healthy)
    assert unit.verdict == "corrupt"
    assert any("__3_0.distcp" in (f.error or "") for f in unit.files)
    assert "__3_0.distcp" in result.reason


def test_a_missing_deepspeed_rank_partition_is_named(framework_units: Any, tmp_path: Path) -> None:
    hurt = damage.missing_rank_file(framework_units.path("deepspeed/zero2"), tmp_path, rank=1)
    step4 = hurt.file.parent
    unit, result, _diffed = _agree(step4, framework_units.path("deepspeed/zero2/global_step4"))
    assert unit.verdict == "corrupt"
    zero = next(e for e in unit.evidence if e.check == "zero-partitions")
    assert zero.outcome == "fail"
    assert hurt.file.name in zero.message
    assert "122 of 244 optimizer elements have no state" in zero.message
    assert hurt.file.name in result.reason
    healthy_step = next(u for u in scan([str(hurt.root)]).units if u.path.endswith("global_step2"))
    assert healthy_step.verdict == "clean"  # the other step of the run is untouched


@pytest.mark.parametrize(
    ("newer", "older", "stale", "step"),
    [
        ("hf-trainer/checkpoint-4", "hf-trainer/checkpoint-2", 2, 4),
        ("lightning/steps/step=8", "lightning/steps/step=4", 4, 8),
    ],
)
def test_a_stale_optimizer_is_torn_with_the_step_disagreement(
    framework_units: Any, tmp_path: Path, newer: str, older: str, stale: int, step: int
) -> None:
    healthy = framework_units.path(newer)
    hurt = damage.stale_optimizer(healthy, framework_units.path(older), tmp_path)
    unit, result, _diffed = _agree(hurt.root, healthy)
    assert unit.verdict == "torn"
    assert unit.step == step
    failed = [e for e in unit.evidence if e.outcome == "fail"]
    assert any(
        e.check == "step-counters" and f"say {stale} but the checkpoint's step is {step}" in e.message
        for e in failed
    ), [e.message for e in failed]
    assert "stale optimizer file" in result.reason


def test_a_stale_optimizer_in_a_step_folder_is_not_consistent_but_no_tear_from_a_name(
    framework_units: Any, tmp_path: Path
) -> None:
    # step_4/ holds model.pt (no step field) and step_2's optimizer.pt: only the folder's name says 4, and a
    # name is a label: nothing inside the unit shows a tear, so it is unknown, never consistent.
    healthy = framework_units.path("step-folders/step_4")
    hurt = damage.stale_optimizer(healthy, framework_units.path("step-folders/step_2"), tmp_path)
    result = check_paths([str(hurt.root)]).results[0]
    assert result.verdict == "unknown", result.reason
    (label,) = [e for e in result.evidence if e.check == "step-sources"]
    said = "its name (step_4) says 4 but its optimizer counters (optimizer.pt: <root>) says 2"
    assert said in label.message
    assert "a name is a label" in label.message


def test_a_duplicated_step_folder_is_named_and_its_label_doubted(
    framework_units: Any, tmp_path: Path
) -> None:
    hurt = damage.duplicate_unit(framework_units.path("step-folders/run"), tmp_path, "step_6", "step_8")
    report = scan([str(hurt.root)])
    by_name = {Path(u.path).name: u for u in report.units}
    assert by_name["step_8"].identical_to == [str(hurt.root / "step_6")]
    assert by_name["step_6"].identical_to == [str(hurt.root / "step_8")]
    assert by_name["step_8"].verdict == "clean"  # its name says 8, its optimizer counted 6: a label, no tear
    checked = {Path(r.path).name: r for r in check_paths([str(hurt.root)]).results}
    assert checked["step_8"].verdict == "unknown"
    assert checked["step_8"].step == 6
    assert checked["step_8"].identical_to == [str(hurt.root / "step_6")]
    assert any(e.check == "identical" and "step_6" in e.message for e in checked["step_8"].evidence)
    # model.pt beside optimizer.pt with no step recorded: a tear between them would not show
    assert {checked[n].verdict for n in ("step_2", "step_4", "step_6")} == {"unknown"}


def test_a_backup_copy_of_an_hf_checkpoint_is_noted(framework_units: Any, tmp_path: Path) -> None:
    hurt = damage.duplicate_unit(
        framework_units.path("hf-trainer/run"), tmp_path, "checkpoint-4", "checkpoint-4-backup"
    )
    report = scan([str(hurt.root)])
    by_name = {Path(u.path).name: u for u in report.units}
    assert by_name["checkpoint-4-backup"].identical_to == [str(hurt.root / "checkpoint-4")]
    assert report.exit_code == 0  # a copy is a note, not a finding
    checked = {Path(r.path).name: r for r in check_paths([str(hurt.root)]).results}
    assert checked["checkpoint-4"].identical_to == [str(hurt.root / "checkpoint-4-backup")]
    assert checked["checkpoint-4"].fingerprint == by_name["checkpoint-4"].fingerprint  # one fingerprint


# -- diff of consecutive healthy units -------------------------------------------------------------

CONSECUTIVE = [
    ("hf-trainer/checkpoint-2", "hf-trainer/checkpoint-4"),
    ("accelerate/checkpoint_0", "accelerate/checkpoint_1"),
    ("step-folders/step_2", "step-folders/step_4"),
    ("step-folders/step_4", "step-folders/step_6"),
    ("deepspeed/zero1/global_step2", "deepspeed/zero1/global_step4"),
    ("deepspeed/zero2/global_step2", "deepspeed/zero2/global_step4"),
    ("deepspeed/zero1-bf16/global_step2", "deepspeed/zero1-bf16/global_step4"),
    ("deepspeed/zero2-bf16/global_step2", "deepspeed/zero2-bf16/global_step4"),
    ("dcp/ddp/step_2", "dcp/ddp/step_4"),
    ("dcp/fsdp2/step_2", "dcp/fsdp2/step_4"),
    ("lightning/steps/step=2", "lightning/steps/step=4"),
    ("lightning/steps/step=4", "lightning/steps/step=6"),
    ("lightning/steps/step=6", "lightning/steps/step=8"),
    ("lightning/steps/step=8", "lightning/steps/step=10"),
    ("lightning/steps/step=10", "lightning/steps/step=12"),
    ("lightning/best/last", "lightning/steps/step=8"),
    ("lightning/best/epoch=0-step=4-val_loss=0.926", "lightning/best/epoch=1-step=8-val_loss=0.955"),
]


@pytest.mark.parametrize(("a", "b"), CONSECUTIVE)
def test_diff_of_consecutive_healthy_units_exits_0(framework_units: Any, a: str, b: str) -> None:
    report = diff_paths(str(framework_units.path(a)), str(framework_units.path(b)))
    document = report.to_json()
    json.dumps(document, allow_nan=False)
    assert document["exit_code"] == 0, (document["verdict"], document["same_run"], document["units"])
    assert not report.not_compared
    assert report.tensors
    if a.startswith("dcp/fsdp2"):
        names = [t.name for t in report.tensors]
        assert not any("@" in n for n in names)  # whole tensors, not chunk by chunk
        weight = next(t for t in report.tensors if t.name == "model.0.weight")
        assert (weight.shape, weight.chunks, weight.status) == ([16, 8], 2, "changed")


def test_a_deepspeed_model_states_file_given_alone_is_judged_alone(framework_units: Any) -> None:
    """Its partitions are beside it but not what was asked about: their absence from the unit is a note."""
    lone = [
        str(framework_units.path(f"deepspeed/zero2/global_step{s}") / "mp_rank_00_model_states.pt")
        for s in (2, 4)
    ]
    (unit,) = scan([lone[0]]).units
    (result,) = check_paths([lone[0]]).results
    diffed = diff_paths(*lone)
    assert exit_code([unit.verdict]) == exit_code([result.verdict]) == diffed.exit_code == 0
    zero = next(e for e in unit.evidence if e.check == "zero-partitions")
    assert zero.outcome == "note"
    assert "only this file was given: give its folder" in zero.message
