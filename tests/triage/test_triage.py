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
from triage.runs import BLOWUP, STALL_FLOOR, story_run

pytestmark = pytest.mark.slow


def test_naive_saves_stalled_the_loop_tore_their_files_and_a_corrupt_batch_exploded() -> None:
    """Each naive save is two findings joined by time: it blocked the loop (the spike after it followed the
    stall) and it raced training (the file it wrote is torn). The tear is never the spike's cause."""
    report = triage(str(story_run("naive", True)), stall_floor_s=STALL_FLOOR)
    by_step = {c.step: c for c in report.checkpoints}
    assert sorted(by_step) == [50, 100, 150, 200]
    assert all(c.step_source == "step field" for c in report.checkpoints)
    # Staged at fixed steps (trainprobe.demo.story): each save before the corrupt batch tears and the loss
    # spikes on the step after it; the same story on every run, at any load.
    # The live run's incidents first, then what the saves wrote (each tear at its save's step).
    assert [(c.cause, c.step, c.confidence) for c in report.conclusions] == [
        ("save-stall", 51, "high"),
        ("save-stall", 101, "high"),
        ("save-stall", 151, "high"),
        ("gradient-explosion", BLOWUP, "high"),
        ("save-race", 50, "high"),
        ("save-race", 100, "high"),
        ("save-race", 150, "high"),
    ]
    assert {s: c.verdict for s, c in by_step.items()} == {
        50: "torn",
        100: "torn",
        150: "torn",
        200: "nonfinite",
    }
    stalls = [c for c in report.conclusions if c.cause == "save-stall"]
    races = [c for c in report.conclusions if c.cause == "save-race"]
    for save, stall, race in zip((50, 100, 150), stalls, races, strict=True):
        unit = by_step[save]
        assert race.title == f"the checkpoint save at step {save} raced training: {unit.relpath} is torn"
        assert race.anomalies == []  # a finding about the file, not about the live run
        assert race.checkpoint == stall.checkpoint == unit.path
        assert "the file itself holds two optimizer steps" in race.confidence_rule
        assert "training went on while the file was written" in "\n".join(race.evidence)
        assert "the live run did not resume from it" in "\n".join(race.evidence)
        assert stall.title == (
            f"the checkpoint save at step {save} blocked the loop 2 s and the spike in loss followed the "
            "stall"
        )
        assert [a.step for a in stall.anomalies] == [save + 1]
        text = "\n".join(stall.evidence)
        assert "that save stalled logging 2.0 s" in text
        assert (
            "an anomaly followed 3 of the run's 3 saves that stalled (the saves at steps 50, 100, 150)"
            in text
        )
        assert "a torn file cannot change a live run that did not resume from it" in text
        assert stall.confidence_rule.startswith("the stall is measured, the anomaly began 1 step(s) after")
        assert stall.alternatives
        assert "left the model in eval mode" in stall.alternatives[0]
        assert f"not ruled out: {stall.alternatives[0]}" in stall.evidence
        # joined by time, each naming the other
        assert stall.related == [{"cause": "save-race", "step": save, "title": race.title}]
        assert race.related == [{"cause": "save-stall", "step": save + 1, "title": stall.title}]
        assert "torn" not in stall.title
        assert "raced" not in stall.title
    (explosion,) = [c for c in report.conclusions if c.cause == "gradient-explosion"]
    assert explosion.step == BLOWUP
    assert {a.kind for a in explosion.anomalies} >= {"non_finite", "cliff"}
    assert explosion.checkpoint == by_step[200].path
    assert by_step[200].verdict == "nonfinite"
    assert by_step[200].optimizer_nonfinite
    assert any("in optimizer state" in e and "exp_avg" in e for e in explosion.evidence)
    assert explosion.alternatives == [
        "a corrupt batch (NaN/Inf in its inputs or labels) or a numeric overflow (fp16) at that step: the "
        "log shows no climb before it, which a growing gradient usually does"
    ]
    # Every naive save tore: nothing is safe to resume from, and the report says so.
    assert report.resume_from is None
    assert "no checkpoint is healthy before step 180" in report.resume_reason
    assert report.exit_code == 1
    assert report.facts == []  # its save lines name the files where they are, at a regular cadence


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
    assert report.facts == []
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
        "summary", "resume_from", "conclusions", "units", "saves", "disagreements", "duplicates", "facts",
        "timeline", "log_files", "logs_skipped", "near_steps", "seconds", "logs",
    ]  # fmt: skip
    assert list(doc["answers"]) == ["broken", "logs", "causes", "resume"]
    assert all(doc["answers"][k]["lines"] for k in doc["answers"])
    assert doc["exit_code"] == 1
    assert doc["verdict"] == "problems"
    assert set(doc["conclusions"][0]) == {
        "cause", "title", "confidence", "confidence_rule", "step", "anomalies", "evidence", "alternatives",
        "related", "suggestion", "checkpoint",
    }  # fmt: skip
    assert {c["confidence"] for c in doc["conclusions"]} <= {"high", "medium", "low"}
    assert all(c["confidence_rule"] for c in doc["conclusions"])
    assert set(doc["units"][0]) == {
        "path", "relpath", "framework", "format", "step", "step_source", "step_sources", "verdict", "reason",
        "findings", "step_groups", "nonfinite_tensors", "nonfinite_tensor_count", "nonfinite_values",
        "identical_to", "byte_identical_to", "saved_at", "between", "torn_by", "bytes", "mtime",
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
    event = marked.conclusions[0]
    assert "1 step(s) after the logged event at step 60: swapped the data shard to shard-7" in event.evidence
    assert (event.confidence, event.alternatives) == (
        "medium",
        ["a coincidence: the logged event and the anomaly are 1 step(s) apart"],
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


def test_a_save_that_stalled_once_is_medium_and_its_torn_file_a_finding_of_its_own() -> None:
    save = {"kind": "checkpoint_save", "step": 100, "text": "Saving", "wall": None, "stall_s": 30.0}
    report = conclude(_collected([_spike(102)], [save], "consistent"))
    (c,) = report.conclusions
    assert (c.cause, c.confidence) == ("save-stall", "medium")
    assert (
        c.title
        == "the checkpoint save at step 100 blocked the loop 30 s and the spike in loss followed the stall"
    )
    assert c.confidence_rule == "the stall is measured, but it followed only this save"
    assert "that save stalled logging 30.0 s: the loop logged no step meanwhile" in c.evidence
    assert "the file this save wrote, step_100.pt (step 100 from its step field), is consistent" in c.evidence
    assert "a hard batch at step 102 by coincidence" in c.alternatives
    torn = conclude(_collected([_spike(102)], [save], "torn"))
    assert [(c.cause, c.step, c.confidence) for c in torn.conclusions] == [
        ("save-stall", 102, "medium"),  # the spike still follows the stall, not the tear
        ("save-race", 100, "high"),  # its counters say 100 and 102: the state moved while it was written
    ]
    stall, race = torn.conclusions
    assert race.title == "the checkpoint save at step 100 raced training: step_100.pt is torn"
    assert stall.title == c.title


def test_a_torn_file_after_a_save_that_did_not_stall_explains_no_spike() -> None:
    """With a clock and no stall at the save, the torn file is the only thing near the spike: it cannot
    have changed the live run, so the spike's cause stays unknown."""
    save = {"kind": "checkpoint_save", "step": 100, "text": "Saving", "wall": 10.0, "stall_s": None}
    doc = _collected([_spike(102)], [save], "torn")
    doc["logs"]["runs"][0]["has_wall_clock"] = True
    report = conclude(doc)
    assert [(c.cause, c.step, c.confidence) for c in report.conclusions] == [
        ("unknown", 102, "low"),
        ("save-race", 100, "high"),
    ]
    assert (
        "a checkpoint save at step 100 precedes it, but it did not stall logging; the file it wrote is torn, "
        "which cannot change the live run"
    ) in report.conclusions[0].evidence
    # Without a clock, a stall cannot be measured: a spike right after the save is a low-confidence stall.
    doc["logs"]["runs"][0]["has_wall_clock"] = False
    unclocked = conclude(doc).conclusions[0]
    assert (unclocked.cause, unclocked.confidence) == ("save-stall", "low")
    assert unclocked.title == "the spike in loss began 2 step(s) after the checkpoint save at step 100"


def test_a_resume_after_a_torn_save_says_the_live_run_may_carry_the_tear() -> None:
    save = {"kind": "checkpoint_save", "step": 100, "text": "Saving", "wall": None, "stall_s": None}
    resume = {"kind": "resume", "step": 120, "text": "step went back from 180 to 120", "wall": None,
              "stall_s": None}  # fmt: skip
    report = conclude(_collected([_spike(125)], [save, resume], "torn"))
    spike, race = report.conclusions
    assert (spike.cause, race.cause) == ("resume", "save-race")
    assert any(
        "the run resumed at step 120 after this save: if it loaded this file" in e for e in race.evidence
    )
    assert any("the last save before the resume wrote a torn file, step_100.pt" in e for e in spike.evidence)


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
    assert alone.conclusions[0].confidence_rule == "no rule's evidence is there"
    assert alone.resume_from is not None
    assert alone.resume_from.step == 200  # a recovered spike does not rule out the checkpoints after it


def test_the_seed_log_alone_names_the_stalling_saves(tmp_path: Path) -> None:
    """Only a log (the seed's story) and no checkpoint: saves that stalled, and a cliff nothing explains."""
    from metrics.synthetic import write_seed_story

    write_seed_story(tmp_path / "train.log")
    report = triage(str(tmp_path))
    got = [(c.step, c.cause, c.confidence) for c in report.conclusions]
    assert got == [
        (2029, "save-stall", "medium"),
        (4021, "save-stall", "medium"),
        (4229, "metric-pipeline", "medium"),
    ]
    first = report.conclusions[0]
    assert (
        first.title
        == "the checkpoint save at step 2000 blocked the loop 170 s and the spike in loss followed the stall"
    )
    assert "that save stalled logging 170.0 s: the loop logged no step meanwhile" in first.evidence
    assert (
        "an anomaly followed 2 of the run's 2 saves that stalled (the saves at steps 2000, 4001)"
        in first.evidence
    )
    assert first.confidence_rule == "the stall is measured, but the anomaly began 29 steps after the save"
    assert "no checkpoint unit on disk is the one the save at step 2000 wrote" in first.evidence
    # The accuracy falls off a cliff while the loss holds: the metric or its pipeline, not the model.
    cliff = report.conclusions[2]
    assert cliff.title == (
        "acc fell off a cliff at step 4229 while loss held steady (0.698 before, 0.697 after): the metric or "
        "its eval pipeline broke, not the model"
    )
    assert any(a.startswith("the eval data changed") for a in cliff.alternatives)
    # The log's own fact: a save off its cadence (2000, then 4001), one line of what the logs show.
    assert [f.kind for f in report.facts] == ["irregular-cadence"]
    assert report.answers["logs"]["lines"][-1] == f"fact: {report.facts[0].text}"
    assert report.resume_reason == "no checkpoint found in the run directory"
    assert report.exit_code == 1


def _acc_cliff_with_loss(loss_after: float) -> dict:
    """An accuracy cliff at step 150 of a run whose loss is 0.3 before it and ``loss_after`` from it on."""
    cliff = {"kind": "cliff", "severity": "error", "run": "train", "metric": "acc", "step": 150,
             "end_step": 300, "message": "acc fell off a cliff", "suggestion": "look"}  # fmt: skip
    doc = _collected([cliff], [], "consistent")
    steps = list(range(1, 301))
    values = [0.3 if s < 150 else loss_after for s in steps]
    doc["logs"]["series"] = {"train": {"loss": {"steps": steps, "values": values}}}
    return doc


def test_an_accuracy_cliff_while_the_loss_keeps_falling_is_the_metric_pipeline() -> None:
    """A run still learning (its loss a third lower after the cliff) fits its batches: the metric broke. Only
    a loss that rose with the cliff says the model changed."""
    (falling,) = conclude(_acc_cliff_with_loss(0.2)).conclusions
    assert falling.cause == "metric-pipeline"
    assert falling.title.startswith("acc fell off a cliff at step 150 while loss kept falling (0.3 before")
    (rose,) = conclude(_acc_cliff_with_loss(0.4)).conclusions
    assert rose.cause != "metric-pipeline"


def test_a_fresh_optimizers_moments_under_later_counters_are_an_optimizer_reset_not_a_race() -> None:
    doc = _collected([], [], "torn")
    check = doc["units"][1]["check"]
    check["reason"] = "optimizer: the moments are a fresh optimizer's while the step counters say 100"
    fresh = {"check": "moments-vs-counter", "outcome": "fail", "indicates": "torn",
             "message": check["reason"], "file": "", "tensors": [], "values": {"counter": 100}}  # fmt: skip
    check["evidence"] = [fresh]
    (c,) = conclude(doc).conclusions
    assert (c.cause, c.step, c.confidence) == ("optimizer-reset", 100, "high")
    assert c.title == (
        "step_100.pt, saved at step 100, holds a fresh optimizer's state under step counters of 100: the "
        "optimizer was re-initialised, not the run's state saved"
    )
    assert "torn: step_100.pt (step 100) — optimizer: the moments are a fresh optimizer's" in "\n".join(
        conclude(doc).answers["broken"]["lines"]
    )
