"""``triage`` through the MCP server gives the document ``trainprobe triage --json`` and the library give, for
a run directory trained by the demo's story (real torch, torn saves that stall, a corrupt batch)."""

from __future__ import annotations

import json
import subprocess
import sys

from mcp_harness import McpSession, assert_kept_in_full, text_of, without_timings

from trainprobe.triage import triage
from triage.runs import STALL_FLOOR, story_run


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
    assert lines[-2] == "no checkpoint to resume from"
    first = document["conclusions"][0]
    assert f"- step {first['step']}: {first['title']} ({first['confidence']} confidence)" in text
    torn = [c for c in document["checkpoints"] if c["verdict"] == "torn"]
    assert torn
    assert all(f"- {c['relpath']} step {c['step']} (step field): torn — " in text for c in torn)
    order = ["broken: ", "the logs show ", "causes: ", "no checkpoint to resume from"]
    assert [next(i for i, line in enumerate(lines) if line.startswith(o)) for o in order] == sorted(
        next(i for i, line in enumerate(lines) if line.startswith(o)) for o in order
    )  # the four answers, in the order a user asks them
    assert_kept_in_full(text, document)
