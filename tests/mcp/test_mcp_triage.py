"""``triage`` through the MCP server gives the document ``trainprobe triage --json`` and the library give, for
a run directory trained by the demo's story (real torch, torn saves that stall, a corrupt batch)."""

from __future__ import annotations

import json
import subprocess
import sys

from mcp_harness import McpSession, assert_kept_in_full, text_of, without_timings

from trainprobe.triage import triage
from triage.runs import STALL_FLOOR, seed_run, story_run


def test_triage_equals_the_library_and_the_cli(server: McpSession) -> None:
    run_dir = str(story_run("naive", True))
    result = server.call("triage", {"run_dir": run_dir, "stall_floor_s": STALL_FLOOR})
    assert not result.is_error, text_of(result)
    document = result.structured_content
    assert without_timings(document) == without_timings(triage(run_dir, stall_floor_s=STALL_FLOOR).to_json())
    cli = subprocess.run(
        [sys.executable, "-m", "trainprobe", "triage", run_dir, "--json", "--stall-floor", str(STALL_FLOOR)],
        capture_output=True,
        text=True,
    )
    assert cli.returncode == document["exit_code"] == 1, cli.stderr
    assert without_timings(json.loads(cli.stdout)) == without_timings(document)
    assert document["target"] is None  # the local default is the CLI without --on

    text = text_of(result)
    lines = text.splitlines()
    assert lines[0].startswith(f"triage of {run_dir}: problems (exit code 1) — ")
    assert document["resume_from"] is None  # every checkpoint of this run is torn or non-finite
    assert lines[-2].startswith("no checkpoint to resume from: no checkpoint is healthy before step")
    first = document["conclusions"][0]
    assert f"- step {first['step']}: {first['title']} ({first['confidence']} confidence)" in text
    torn = [c for c in document["units"] if c["verdict"] == "torn"]
    assert torn
    assert all(f"- torn: {c['relpath']} (step {c['step']}) mixes training steps" in text for c in torn)
    order = ["broken: ", "the logs show ", "causes: ", "no checkpoint to resume from"]
    assert [next(i for i, line in enumerate(lines) if line.startswith(o)) for o in order] == sorted(
        next(i for i, line in enumerate(lines) if line.startswith(o)) for o in order
    )  # the four answers, in the order a user asks them
    assert_kept_in_full(text, document)


def test_triage_of_the_seed_run_equals_the_cli(server: McpSession) -> None:
    """The seed's run (Python-logging log, per-step folders by the real race, a byte copy, a misfiled step):
    the MCP document is the CLI's, and its summary names the duplicate and the disagreement."""
    run_dir = str(seed_run())
    result = server.call("triage", {"run_dir": run_dir})
    assert not result.is_error, text_of(result)
    document = result.structured_content
    cli = subprocess.run(
        [sys.executable, "-m", "trainprobe", "triage", run_dir, "--json"], capture_output=True, text=True
    )
    assert cli.returncode == document["exit_code"] == 1, cli.stderr
    assert without_timings(json.loads(cli.stdout)) == without_timings(document)
    assert document["duplicates"]
    assert document["disagreements"]
    text = text_of(result)
    assert "- byte-identical copies: checkpoints/best/state.pt, checkpoints/step_30/state.pt" in text
    assert "- step disagreement: checkpoints/step_25/state.pt" in text
