"""The log's own facts in triage's answer: one line each in what the logs show, in the terminal, the JSON and
the MCP summary; none for a healthy run."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainprobe.triage import conclude, triage
from triage.runs import SEED_LOG_PATH, seed_run


def _terminal(run_dir: Path, *options: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "trainprobe", "triage", str(run_dir), *options],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return " ".join(proc.stdout.split())


def _mcp_summary(doc: dict[str, Any]) -> str:
    from trainprobe.mcp.tools.triage import summarise

    return "\n".join(summarise(doc).lines)


def _write_unmeasured_log(path: Path) -> None:
    """The issue's log: tok/s=51234 on all 5,000 lines, across the two saves' stalls (at 2000, then 4001,
    naming /root/ckpts)."""
    wall = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    lines = []
    for step in range(1, 5001):
        wall += dt.timedelta(seconds=0.5)
        stamp = wall.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        lines.append(f"{stamp} - INFO - step {step} | loss {0.8 + 2 / (1 + step / 100):.4f} | tok/s 51234")
        if step in (2000, 4001):
            lines.append(f"{stamp} - INFO - Saving checkpoint to /root/ckpts/step_{step}")
            wall += dt.timedelta(seconds=171)
    path.write_text("\n".join(lines) + "\n")


def test_a_constant_rate_and_a_save_off_its_cadence_are_one_line_each(tmp_path: Path) -> None:
    _write_unmeasured_log(tmp_path / "train.log")
    report = triage(str(tmp_path))
    assert [f.kind for f in report.facts] == ["constant-series", "irregular-cadence"]
    constant, cadence = report.facts
    assert constant.text.startswith(
        "tok/s is 51234 on every one of its 5,000 rows, even across the log's 2 stall(s): a measured rate or "
        "time moves; this one is a constant written to the log, not a measurement"
    )
    assert "the one at step 4001 is 1 step(s) off it (after 4000)" in cadence.text
    doc = report.to_json()
    assert [f["kind"] for f in doc["facts"]] == ["constant-series", "irregular-cadence"]
    assert doc["answers"]["logs"]["facts"] == doc["facts"]
    assert doc["summary"]["facts"] == 2
    lines = doc["answers"]["logs"]["lines"]
    for fact in report.facts:
        assert lines.count(f"fact: {fact.text}") == 1
        assert f"fact: {fact.text}" in _terminal(tmp_path)
        assert f"- fact: {fact.text}" in _mcp_summary(doc)
    assert report.exit_code == 0  # a fact alone never changes the exit code


@pytest.mark.slow
def test_the_seeds_copied_run_names_the_other_directory_and_the_unit_no_save_wrote() -> None:
    """The seed's run (the real race, its log's saves naming /scratch/exp3/checkpoints/step_N, copied since;
    checkpoints/best/ a byte copy of step_30 that no save line wrote)."""
    run = seed_run()
    report = triage(str(run), stall_floor_s=5, event_patterns=["lr changed to"])
    assert [f.kind for f in report.facts] == ["saves-named-elsewhere", "unit-without-save-line"]
    elsewhere, unsaved = report.facts
    assert elsewhere.text == (
        f"6 save line(s) name {SEED_LOG_PATH.rsplit('/', 1)[0]} (e.g. {SEED_LOG_PATH}/step_10), but the "
        f"units are in {run}: the run was copied or moved, so the units' file times are when they were "
        "copied, not when they were saved"
    )
    assert unsaved.text.startswith(
        "1 checkpoint unit(s) have no save line in the log, which records 6 save(s): "
        "checkpoints/best/state.pt (the same tensors as checkpoints/step_30/state.pt: a copy)"
    )
    doc = json.loads(json.dumps(report.to_json()))
    said = _terminal(run, "--stall-floor", "5", "--event", "lr changed to")
    for fact in report.facts:
        assert f"fact: {fact.text}" in said
        assert f"- fact: {fact.text}" in _mcp_summary(doc)
    # The byte copy of a torn unit is named in the tear's finding, not a finding of its own.
    tears = [c for c in report.conclusions if c.cause == "save-race"]
    assert [c.step for c in tears] == [10, 30]
    assert (
        "checkpoints/best/state.pt is a copy of it (the same bytes), torn the same way" in tears[1].evidence
    )


def _unit(rel: str, step: int) -> dict[str, Any]:
    check = {"verdict": "consistent", "reason": "counters equal", "step": step, "step_source": "step field",
             "step_sources": [{"source": "step field", "value": step, "counts": "optimizer steps"}],
             "nonfinite": [], "evidence": []}  # fmt: skip
    return {"path": f"/data/run/{rel}", "relpath": rel, "bytes": 1, "mtime": None, "check": check}


def _doc(units: list[dict[str, Any]], save_steps: list[int]) -> dict[str, Any]:
    saves = [
        {"kind": "checkpoint_save", "step": s, "text": f"saving ckpt/step_{s}", "path": f"ckpt/step_{s}",
         "wall": None, "stall_s": None}
        for s in save_steps
    ]  # fmt: skip
    run = {"name": "train", "first_step": 0, "last_step": 6000, "events": saves}
    logs = {"schema_version": 3, "runs": [run], "findings": []}
    return {"run_dir": "/data/run", "host": "h", "log_files": ["/data/run/train.log"], "seconds": 0.1,
            "logs_skipped": [], "units": units, "logs": logs}  # fmt: skip


def test_saves_that_never_landed_are_a_fact_and_a_rotation_is_not() -> None:
    units = [_unit(f"ckpt/step_{s}", s) for s in (1000, 2000)]
    report = conclude(_doc(units, [1000, 2000, 3000]))
    (fact,) = report.facts
    assert fact.kind == "save-line-without-unit"
    assert fact.text.startswith("the log's save(s) at step 3000 have no unit on disk, later than every unit")
    assert f"fact: {fact.text}" in report.answers["logs"]["lines"]
    assert report.exit_code == 0  # a fact, not a finding
    rotated = conclude(_doc([_unit(f"ckpt/step_{s}", s) for s in (2000, 3000)], [1000, 2000, 3000]))
    assert rotated.facts == []  # CheckpointWriter or save_total_limit keeping the newest
