"""What triage says about a unit's identity: the save that wrote it, where its steps disagree, duplicates, a
log it could not read, and one answer with ``check`` for every unit."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainprobe.checkpoint.check import check_paths
from trainprobe.triage import conclude, triage
from triage.runs import STALL_FLOOR, story_run


def _unit(rel: str, step: int | None, *, name_step: int | None = None, mtime: float | None = None) -> dict:
    sources = (
        [{"source": "step field", "value": step, "counts": "optimizer steps"}] if step is not None else []
    )
    if name_step is not None:
        sources.append({"source": "directory", "value": name_step, "counts": "optimizer steps"})
    chosen = step if step is not None else name_step
    check = {"verdict": "consistent", "reason": "counters equal", "step": chosen,
             "step_source": "step field" if step is not None else ("directory" if name_step else "nothing"),
             "step_sources": sources, "nonfinite": [], "evidence": []}  # fmt: skip
    return {"path": f"/data/run/{rel}", "relpath": rel, "bytes": 1, "mtime": mtime, "check": check}


def _doc(units: list[dict], saves: list[dict], skipped: list[dict] | None = None) -> dict:
    run = {"name": "train", "first_step": 0, "last_step": 300, "events": saves}
    logs = {"schema_version": 3, "runs": [run], "findings": []}
    return {"run_dir": "/data/run", "host": "h", "log_files": ["/data/run/train.log"], "seconds": 0.1,
            "logs_skipped": skipped or [], "units": units, "logs": logs}  # fmt: skip


def _save(step: int, path: str | None, wall: float | None = None) -> dict:
    return {"kind": "checkpoint_save", "step": step, "text": f"saving to {path}", "path": path, "wall": wall,
            "stall_s": None}  # fmt: skip


def test_saves_are_matched_by_the_path_they_name_even_from_a_moved_run_dir() -> None:
    units = [
        _unit("ckpt/step_100/model.pt", 100, name_step=100),
        _unit("ckpt/step_200/model.pt", 200, name_step=200),
    ]
    saves = [_save(100, "/old/place/run/ckpt/step_100"), _save(200, "ckpt/step_200/model.pt")]
    report = conclude(_doc(units, saves))
    assert [(s.unit, s.matched_by) for s in report.saves] == [
        ("ckpt/step_100/model.pt", "path"),
        ("ckpt/step_200/model.pt", "path"),
    ]
    assert report.disagreements == []


def test_a_folder_whose_step_field_disagrees_is_reported_and_the_step_field_trusted() -> None:
    # The log saved step 300 to step_300/, but the file there holds step 250: a copy put in the wrong folder.
    units = [_unit("ckpt/step_300/model.pt", 250, name_step=300)]
    report = conclude(_doc(units, [_save(300, "ckpt/step_300")]))
    (d,) = report.disagreements
    assert d.steps == {"step field": 250, "directory": 300, "log save line": 300}
    assert (d.trusted, d.step) == ("step field", 250)
    assert "written by the save itself" in d.why
    assert report.checkpoints[0].step == 250  # check's step: one answer
    assert any(
        line.startswith("step disagreement: ckpt/step_300/model.pt")
        for line in report.answers["broken"]["lines"]
    )


def test_a_path_saved_again_holds_the_last_save_and_time_matches_what_names_no_path() -> None:
    units = [_unit("last.pt", None, mtime=1000.5), _unit("snap", None, mtime=2000.2)]
    saves = [_save(10, "last.pt", 900.0), _save(20, "last.pt", 1000.0), _save(30, None, 2000.0)]
    report = conclude(_doc(units, saves))
    assert [(s.step, s.unit, s.matched_by) for s in report.saves] == [
        (10, None, None),
        (20, "last.pt", "path"),
        (30, "snap", "time"),
    ]
    by_rel = {c.relpath: c for c in report.checkpoints}
    assert (by_rel["last.pt"].step, by_rel["last.pt"].step_source) == (20, "log save line")
    assert (by_rel["snap"].step, by_rel["snap"].step_source) == (30, "log save line")


def test_a_log_that_could_not_be_read_is_the_first_problem_never_no_anomalies() -> None:
    skipped = [{"path": "/data/run/train.log", "why": "no metric rows"},
               {"path": "/data/run/notes.txt", "why": "no metric rows"}]  # fmt: skip
    doc = _doc([_unit("step_100.pt", 100)], [], skipped)
    doc["logs"] = None
    report = conclude(doc)
    assert [p.text() for p in report.problems] == ["train.log: not read — no metric rows"]
    lines = report.answers["logs"]["lines"]
    assert lines == ["no log read: train.log: not read — no metric rows"]
    assert not any("no anomalies" in line for answer in report.answers.values() for line in answer["lines"])
    assert report.exit_code == 2  # nothing found, but not everything read: never healthy
    assert report.to_json()["problems"][0]["text"] == "train.log: not read — no metric rows"


def test_a_climb_into_nan_is_the_explosion_not_a_cause_of_its_own() -> None:
    """The demo's writer run: the drifting stream makes the loss climb a little before the corrupt batch; the
    divergence detector ends the climb at the last finite row. One explosion, resume from before the NaN."""
    findings = [
        {"kind": "divergence", "severity": "error", "run": "train", "metric": "loss", "step": 85,
         "end_step": 179, "message": "loss is diverging from step 85", "suggestion": ""},
        {"kind": "non_finite", "severity": "error", "run": "train", "metric": "loss", "step": 180,
         "end_step": 200, "message": "loss is NaN at step 180", "suggestion": ""},
    ]  # fmt: skip
    units = [_unit(f"step_{s}.pt", s) for s in (100, 150, 200)]
    units[2]["check"].update(verdict="nonfinite", nonfinite=[
        {"name": "optimizer.state.0.exp_avg", "param_name": "w", "nan": 4, "posinf": 0, "neginf": 0,
         "optimizer_state": True}], nonfinite_tensor_count=1, nonfinite_values=4)  # fmt: skip
    units[2]["check"]["evidence"] = [{"outcome": "fail", "indicates": "nonfinite", "values": {}}]
    doc = _doc(units, [])
    doc["logs"]["findings"] = findings
    steps = list(range(1, 201))
    values = [0.1 + 0.001 * s for s in steps[:179]] + [None] * 21
    doc["logs"]["series"] = {"train": {"loss": {"steps": steps, "values": values}}}
    report = conclude(doc)
    assert [(c.cause, c.step) for c in report.conclusions] == [("gradient-explosion", 180)]
    assert {a.kind for a in report.conclusions[0].anomalies} == {"divergence", "non_finite"}
    assert report.resume_from is not None
    assert report.resume_from.step == 150
    # A climb that came back down before the NaN is an anomaly of its own.
    values[170:179] = [0.1] * 9
    findings[0]["end_step"] = 170
    apart = conclude(doc)
    assert [c.step for c in apart.conclusions] == [85, 180]


@pytest.mark.slow
def test_every_unit_has_checks_verdict_and_step() -> None:
    """Design rule 5: triage and check never disagree about a unit."""
    for run in (story_run("naive", True), story_run("writer", True)):
        report = triage(str(run), stall_floor_s=STALL_FLOOR)
        checked = {r.path: (r.verdict, r.step, r.step_source) for r in check_paths([str(run)]).results}
        assert {c.path: (c.verdict, c.step, c.step_source) for c in report.checkpoints} == checked


@pytest.mark.slow
def test_a_run_dir_reached_through_a_symlink_says_what_the_real_one_says(tmp_path: Path) -> None:
    """Its units' relpaths (and the titles quoting them) are the real directory's, never ``../naive/``."""
    run = story_run("naive", True)
    link = tmp_path / "latest"
    link.symlink_to(run)
    real, linked = triage(str(run), stall_floor_s=STALL_FLOOR), triage(str(link), stall_floor_s=STALL_FLOOR)
    assert [c.title for c in linked.conclusions] == [c.title for c in real.conclusions]
    assert sorted(c.relpath for c in linked.checkpoints) == sorted(c.relpath for c in real.checkpoints)
    assert not any(c.relpath.startswith("..") for c in linked.checkpoints)


def test_duplicates_name_each_other(tmp_path: Path) -> None:
    units = [_unit("step_100.pt", 100), _unit("best.pt", 100)]
    units[0].update(identical_to=["best.pt"], byte_identical_to=["best.pt"])
    units[1].update(identical_to=["step_100.pt"], byte_identical_to=["step_100.pt"])
    report = conclude(_doc(units, []))
    (dup,) = report.duplicates
    assert (sorted(dup.units), dup.bytes) == (["best.pt", "step_100.pt"], True)
    assert "byte-identical copies: " in "\n".join(report.answers["broken"]["lines"])


def test_resume_prefers_the_unit_whose_name_agrees_and_names_the_misleading_copy() -> None:
    """Issue 23: step_3000 whose step field says 1000 holds the bytes of step_1000 (saved later): resume from
    step_1000, and say step_3000 is the same bytes under a misleading name."""
    units = [
        _unit("step_1000", 1000, name_step=1000, mtime=1.0),
        _unit("step_3000", 1000, name_step=3000, mtime=2.0),
    ]
    units[0].update(identical_to=["step_3000"], byte_identical_to=["step_3000"])
    units[1].update(identical_to=["step_1000"], byte_identical_to=["step_1000"])
    report = conclude(_doc(units, []))
    assert report.resume_from is not None
    assert report.resume_from.relpath == "step_1000"
    (line,) = report.answers["resume"]["lines"]
    assert "step_3000 is the same bytes under a misleading name (it says step 3000" in line, line
