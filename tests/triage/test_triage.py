"""``triage`` on real runs: real torch training, real torn saves, a real gradient explosion."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from trainprobe.errors import UsageError
from trainprobe.triage import SCHEMA_VERSION, collect, conclude, find_run_files, triage
from triage.runs import BLOWUP, SAVE_EVERY, STALL_FLOOR, story_run

pytestmark = pytest.mark.slow


def test_naive_saves_raced_training_and_a_corrupt_batch_exploded() -> None:
    report = triage(str(story_run("naive", True)), stall_floor_s=STALL_FLOOR)
    by_step = {c.step: c for c in report.checkpoints}
    assert sorted(by_step) == [50, 100, 150, 200]
    assert all(c.step_source == "step field" for c in report.checkpoints)
    races = [c for c in report.conclusions if c.cause == "save-race"]
    # Staged at fixed steps (trainprobe.demo.story): each save before the corrupt batch tears and the loss
    # spikes on the step after it; the same story on every run, at any load.
    assert [(c.cause, c.step) for c in report.conclusions] == [
        ("save-race", 51),
        ("save-race", 101),
        ("save-race", 151),
        ("gradient-explosion", BLOWUP),
    ]
    assert {s: c.verdict for s, c in by_step.items()} == {
        50: "torn",
        100: "torn",
        150: "torn",
        200: "nonfinite",
    }
    for race in races:
        save_step = int(race.title.split("step ")[1].split()[0])
        assert save_step % SAVE_EVERY == 0
        assert 0 < race.step - save_step <= 5
        assert by_step[save_step].verdict == "torn"
        assert race.confidence == "high"
        text = "\n".join(race.evidence)
        assert "stalled logging" in text
        assert "is torn: optimizer: per-parameter step counters disagree" in text
    (explosion,) = [c for c in report.conclusions if c.cause == "gradient-explosion"]
    assert explosion.step == BLOWUP
    assert {a.kind for a in explosion.anomalies} >= {"non_finite", "cliff"}
    assert explosion.confidence == "high"
    assert explosion.checkpoint == by_step[200].path
    assert by_step[200].verdict == "nonfinite"
    assert by_step[200].optimizer_nonfinite
    assert any("in optimizer state" in e and "exp_avg" in e for e in explosion.evidence)
    for c in report.conclusions:
        if c.step < BLOWUP and c.step % SAVE_EVERY <= 5:  # right after a save: it raced if its file is torn
            save_step = c.step - c.step % SAVE_EVERY
            assert c.cause == ("save-race" if by_step[save_step].verdict == "torn" else "save-stall")
    # Every naive save tore: nothing is safe to resume from, and the report says so.
    assert report.resume_from is None
    assert "no checkpoint is healthy before step 180" in report.resume_reason
    assert report.exit_code == 1


def test_the_writer_run_keeps_only_the_explosion_and_resumes_from_the_last_clean_checkpoint() -> None:
    report = triage(str(story_run("writer", True)), stall_floor_s=STALL_FLOOR)
    assert [c.cause for c in report.conclusions] == ["gradient-explosion"]
    assert {c.step: c.verdict for c in report.checkpoints} == {
        100: "consistent",
        150: "consistent",
        200: "nonfinite",
    }
    assert all(c.step_source == "manifest" for c in report.checkpoints)
    assert report.resume_from is not None
    assert report.resume_from.step == 150
    assert "before the lasting anomaly at step 180" in report.resume_reason
    assert not any(t.type == "stall" for t in report.timeline)


def test_a_healthy_run_has_no_causes() -> None:
    report = triage(str(story_run("writer", False)), stall_floor_s=STALL_FLOOR)
    assert report.conclusions == []
    assert report.anomalies == []
    assert {c.verdict for c in report.checkpoints} == {"consistent"}
    assert report.resume_from is not None
    assert report.resume_from.step == 200
    assert report.exit_code == 0
    assert report.to_json()["verdict"] == "healthy"


def test_json_schema_is_stable_and_strict() -> None:
    doc = triage(str(story_run("naive", True)), stall_floor_s=STALL_FLOOR).to_json()
    json.dumps(doc, allow_nan=False)
    assert doc["schema_version"] == SCHEMA_VERSION == 3
    assert list(doc) == [
        "schema_version", "verdict", "exit_code", "run_dir", "target", "host", "problems", "answers",
        "summary", "resume_from", "conclusions", "units", "saves", "disagreements", "duplicates",
        "timeline", "log_files", "logs_skipped", "near_steps", "seconds", "logs",
    ]  # fmt: skip
    assert list(doc["answers"]) == ["broken", "logs", "causes", "resume"]
    assert all(doc["answers"][k]["lines"] for k in doc["answers"])
    assert doc["exit_code"] == 1
    assert doc["verdict"] == "problems"
    assert set(doc["conclusions"][0]) == {
        "cause", "title", "confidence", "step", "anomalies", "evidence", "suggestion", "checkpoint"
    }  # fmt: skip
    assert set(doc["units"][0]) == {
        "path", "relpath", "framework", "format", "step", "step_source", "step_sources", "verdict", "reason",
        "findings", "step_groups", "nonfinite_tensors", "nonfinite_tensor_count", "nonfinite_values",
        "identical_to", "byte_identical_to", "saved_at", "bytes", "mtime",
    }  # fmt: skip
    assert {s["matched_by"] for s in doc["saves"]} == {"path"}  # every save line names the file it wrote
    assert {t["kind"] for t in doc["timeline"]} == {"event", "anomaly", "checkpoint"}
    assert {t["type"] for t in doc["timeline"] if t["kind"] == "event"} >= {"checkpoint_save", "stall"}
    assert doc["logs"]["schema_version"] == 3
    assert "series" in doc["logs"]
    steps = [t["step"] for t in doc["timeline"]]
    assert steps == sorted(steps)


def test_collect_json_round_trip_gives_the_same_report() -> None:
    """What --on ships back is JSON: conclusions drawn from a JSON round trip equal the local ones."""
    collected = collect(str(story_run("naive", True)), stall_floor_s=STALL_FLOOR)
    direct = conclude(collected).to_json()
    again = conclude(json.loads(json.dumps(collected))).to_json()
    assert again == direct


def test_steps_from_names_and_from_mtime(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(3, 2)
    run = tmp_path / "run"
    (run / "checkpoint-300").mkdir(parents=True)
    torch.save(model.state_dict(), run / "checkpoint-300" / "model.pt")
    torch.save(model.state_dict(), run / "step_200.pt")
    torch.save(model.state_dict(), run / "last.pt")
    start = float(int(time.time()) - 100)
    lines = [
        f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(start + s))}.000 step {s} | loss {1 / (s + 1):.4f}"
        for s in range(100)
    ]
    (run / "train.log").write_text("\n".join(lines) + "\n")
    os.utime(run / "last.pt", (start + 42.5, start + 42.5))
    report = triage(str(run))
    got = {c.relpath: (c.step, c.step_source, c.verdict) for c in report.checkpoints}
    assert got == {
        "step_200.pt": (200, "name", "unknown"),
        os.path.join("checkpoint-300", "model.pt"): (300, "directory", "unknown"),
        "last.pt": (42, "mtime on the wall clock of log 'train'", "unknown"),
    }
    # (Which step a name states: tests/test_conventions.py.)


def test_a_truncated_checkpoint_is_corrupt_and_never_the_resume_point(tmp_path: Path) -> None:
    src = story_run("writer", False) / "ckpt"
    run = tmp_path / "run"
    shutil.copytree(src, run / "ckpt")
    newest = run / "ckpt" / "step-00000200.pt"
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])
    report = triage(str(run))
    verdicts = {c.step: c.verdict for c in report.checkpoints}
    assert verdicts[200] in ("corrupt", "unreadable")
    assert verdicts[150] == "consistent"
    assert report.resume_from is not None
    assert report.resume_from.step == 150
    assert report.exit_code == 1
    assert report.log_files == []


def test_discovery_keeps_logs_and_checkpoints_apart() -> None:
    logs, checkpoints = find_run_files(str(story_run("writer", False)))
    assert [Path(p).name for p in logs] == ["train.log"]
    assert [Path(p).name for p, _ in checkpoints] == [
        "step-00000100.pt",
        "step-00000150.pt",
        "step-00000200.pt",
    ]


def test_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file or directory"):
        triage(str(tmp_path / "nope"))
    with pytest.raises(UsageError, match="not a valid regular expression"):
        triage(str(tmp_path), event_patterns=["(unclosed"])


def test_custom_events_from_event_patterns_explain_a_spike(tmp_path: Path) -> None:
    lines = [f"step {s} | loss {2.0 if s == 61 else 0.5 + 0.01 * (s % 3):.4f}" for s in range(1, 121)]
    lines.insert(60, "swapped the data shard to shard-7")
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    plain = triage(str(tmp_path))
    assert [c.cause for c in plain.conclusions] == ["unknown"]
    marked = triage(str(tmp_path), event_patterns=["swapped the data shard"])
    assert [e.type for e in marked.timeline if e.kind == "event"] == ["custom"]
    assert [c.cause for c in marked.conclusions] == ["event"]
    assert marked.conclusions[0].evidence[-1] == (
        "1 step(s) after the logged event at step 60: swapped the data shard to shard-7"
    )


def test_only_the_newest_trainer_state_is_read(tmp_path: Path) -> None:
    """The HF Trainer copies its log history into every checkpoint-N/: one log, not one per checkpoint."""
    for n, age in ((500, 200), (1000, 100)):
        folder = tmp_path / f"checkpoint-{n}"
        folder.mkdir()
        state = folder / "trainer_state.json"
        state.write_text(json.dumps({"global_step": n, "log_history": [{"step": 1, "loss": 1.0}]}))
        os.utime(state, (time.time() - age, time.time() - age))
    logs, _ = find_run_files(str(tmp_path))
    assert logs == [str(tmp_path / "checkpoint-1000" / "trainer_state.json")]


def _collected(findings: list[dict[str, object]], events: list[dict[str, object]], ckpt_verdict: str) -> dict:
    """A minimal collect() document: one run with the given findings and events, units at 0/100/200 (the one
    at 100 with ``ckpt_verdict``)."""

    def check(s: int) -> dict[str, object]:
        verdict = ckpt_verdict if s == 100 else "consistent"
        failed = [{"check": "step-counters", "outcome": "fail", "indicates": "torn",
                   "message": "counters disagree", "file": "", "tensors": [],
                   "values": {"counters": {"100": 3, "102": 5}}}]  # fmt: skip
        reason = "step counters disagree" if verdict == "torn" else "counters equal"
        return {"verdict": verdict, "reason": reason,
                "step": s, "step_source": "step field", "framework": "file", "format": "torch-zip",
                "step_sources": [{"source": "step field", "value": s, "counts": "optimizer steps"}],
                "nonfinite": [], "evidence": failed if verdict == "torn" else []}  # fmt: skip

    checkpoints = [
        {"path": f"/r/step_{s}.pt", "relpath": f"step_{s}.pt", "bytes": 1, "mtime": None, "check": check(s)}
        for s in (0, 100, 200)
    ]
    run = {"name": "train", "first_step": 0, "last_step": 300, "events": events}
    logs = {"schema_version": 3, "runs": [run], "findings": findings}
    return {"run_dir": "/r", "host": "h", "log_files": ["/r/train.log"], "logs_skipped": [], "seconds": 0.1,
            "units": checkpoints, "logs": logs}  # fmt: skip


def _spike(step: int) -> dict[str, object]:
    return {"kind": "spike", "severity": "error", "run": "train", "metric": "loss", "step": step,
            "end_step": step + 2, "recovered_after_steps": 3, "message": f"loss spiked at step {step}",
            "suggestion": "look"}  # fmt: skip


def test_a_save_that_stalled_but_wrote_a_consistent_file_stalled_training() -> None:
    save = {"kind": "checkpoint_save", "step": 100, "text": "Saving", "wall": None, "stall_s": 30.0}
    report = conclude(_collected([_spike(102)], [save], "consistent"))
    (c,) = report.conclusions
    assert (c.cause, c.confidence) == ("save-stall", "medium")
    assert "that save stalled logging 30.0 s" in c.evidence
    torn = conclude(_collected([_spike(102)], [save], "torn"))
    assert [(c.cause, c.confidence) for c in torn.conclusions] == [("save-race", "high")]


def test_an_lr_change_or_nothing_explains_a_spike_far_from_saves() -> None:
    lr = {"kind": "lr_change", "step": 140, "text": "lr 0.001 → 0.01", "wall": None, "stall_s": None}
    report = conclude(_collected([_spike(150)], [lr], "consistent"))
    assert [c.cause for c in report.conclusions] == ["lr-change"]
    assert (
        "10 step(s) after the learning-rate change at step 140: lr 0.001 → 0.01"
        in report.conclusions[0].evidence
    )
    alone = conclude(_collected([_spike(150)], [], "consistent"))
    assert [(c.cause, c.confidence) for c in alone.conclusions] == [("unknown", "low")]
    assert alone.resume_from is not None
    assert alone.resume_from.step == 200  # a recovered spike does not rule out the checkpoints after it


def test_the_seed_log_alone_names_the_stalling_saves(tmp_path: Path) -> None:
    """Only a log (the seed's story) and no checkpoint: saves that stalled, and a cliff nothing explains."""
    from metrics.synthetic import write_seed_story

    write_seed_story(tmp_path / "train.log")
    report = triage(str(tmp_path))
    got = [(c.step, c.cause, c.confidence) for c in report.conclusions]
    assert got == [(2029, "save-stall", "medium"), (4021, "save-stall", "medium"), (4229, "unknown", "low")]
    assert "that save stalled logging 170.0 s" in report.conclusions[0].evidence
    assert (
        "no checkpoint unit on disk is the one the save at step 2000 wrote" in report.conclusions[0].evidence
    )
    assert report.conclusions[2].title == "no cause found for the cliff in acc"
    assert report.resume_reason == "no checkpoint found in the run directory"
    assert report.exit_code == 1
