"""The seed's story, and the real logs in tests/data/real-logs used as they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metrics.synthetic import write_seed_story
from trainprobe.metrics import SCHEMA_VERSION, analyze

REAL_LOGS = Path(__file__).parents[1] / "data" / "real-logs"
LLMC = REAL_LOGS / "modded-nanogpt__2024-10-13_llmc" / "main.log"
MUON = REAL_LOGS / "modded-nanogpt__2024-10-10_Muon" / "eb5659d0-fb6a-49e5-a311-f1f89412f726.txt"
BIGSCIENCE = REAL_LOGS / "bigscience__tr8-104B-wide" / "chronicles.md"


def test_seed_story_is_told_exactly(tmp_path: Path) -> None:
    report = analyze(write_seed_story(tmp_path / "train.log"))
    got = [(f.severity, f.kind, f.metric, int(f.step)) for f in report.findings]
    assert got == [
        ("error", "spike", "loss", 2029),
        ("error", "spike", "loss", 4021),
        ("error", "cliff", "acc", 4229),
        ("warning", "stall", "wall clock", 2000),
        ("warning", "stall", "wall clock", 4001),
    ]
    spike, spike2, cliff = report.findings[:3]
    assert "0.8" in spike.message
    assert "→ 13" in spike.message
    assert "29 steps after the checkpoint save at step 2000, which stalled logging 170 s" in spike.message
    assert spike.suggestion.startswith("scan and check the checkpoint saved at step 2000")
    assert "20 steps after the checkpoint save at step 4001, which stalled logging 100 s" in spike2.message
    assert cliff.event is None
    assert cliff.baseline == pytest.approx(0.15, abs=0.005)
    assert cliff.value == pytest.approx(0.005, abs=0.001)
    assert "0.149 → 0.005" in cliff.message
    assert "no checkpoint save or stall within" in cliff.message


def test_json_is_stable_and_joinable(tmp_path: Path) -> None:
    doc = analyze(write_seed_story(tmp_path / "train.log")).to_json(series=True)
    assert doc["schema_version"] == SCHEMA_VERSION == 3
    assert doc["summary"] == {"error": 3, "warning": 2, "info": 0}
    first = doc["findings"][0]
    assert set(first) == {
        "kind",
        "severity",
        "run",
        "metric",
        "step",
        "end_step",
        "value",
        "baseline",
        "magnitude",
        "recovered_after_steps",
        "settled_at",
        "event",
        "message",
        "suggestion",
        "runs",
    }
    assert first["event"]["kind"] == "checkpoint_save"
    assert first["event"]["step"] == 2000
    assert first["event"]["steps_before"] == 29
    assert first["event"]["stall_s"] == pytest.approx(170, abs=1)
    assert [e["step"] for e in doc["runs"][0]["events"] if e["kind"] == "checkpoint_save"] == [2000, 4001]
    assert len(doc["series"]["train"]["loss"]["steps"]) <= 2100
    json.dumps(doc, allow_nan=False)


def test_healthy_llmc_run_gives_no_warnings() -> None:
    report = analyze(LLMC)
    (run,) = report.runs
    assert len(run) == 19640
    assert run.steps[-1] == 19560
    messages = [f.message for f in report.findings]
    assert report.count("error") == 0, messages
    assert report.count("warning") == 0, messages


def test_modded_nanogpt_spikes_recover_and_nanms_is_not_a_nan_loss() -> None:
    report = analyze(MUON)
    (run,) = report.runs
    assert set(run.columns) == {"train_loss", "val_loss", "step_avg"}  # the echoed source is skipped
    assert set(run.metrics) == {"train_loss", "val_loss"}
    assert run.role("step_avg") == "timing"
    assert report.count("error") == 0
    assert report.count("warning") == 0
    spikes = [f for f in report.findings if f.kind == "spike"]
    assert spikes
    assert all(f.metric == "train_loss" and f.recovered_after == 1 for f in spikes)
    # step_avg:nanms in the first steps is a timer with nothing to average yet: no NaN finding at all
    assert not [f for f in report.findings if f.kind == "non_finite"]


def test_bigscience_chronicles_megatron_lines() -> None:
    report = analyze(BIGSCIENCE)
    by_kind = {(f.kind, f.metric, int(f.step)): f for f in report.findings}
    assert ("spike", "lm loss", 7010) in by_kind  # 6.44 -> 11.42: the loss explosion
    missing = by_kind[("missing_value", "lm loss", 9027)]
    assert "loss scale dropped 16384 → 8192" in missing.message
    assert any(e.kind == "resume" for e in report.events[report.runs[0].name])
