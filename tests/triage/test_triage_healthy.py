"""Issue 23's healthy control: what triage says of a careful run's defects it never says of a healthy one.
Two real consecutive checkpoints of a slowly moving run with frozen layers (tests/triage/careful_run.py's
``slow_run``) share their frozen tensors bit for bit: that is frozen layers, said as a note, never a stale
save, a relabel, a tear or a fact of the log — in the terminal, ``--json`` and the MCP summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from triage.careful_run import SLOW_FROZEN, slow_run

pytestmark = pytest.mark.slow


def _triage(run: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainprobe", "triage", str(run), *options],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
        timeout=300,
    )


def test_frozen_layers_of_a_slowly_moving_run_are_a_note_not_a_stale_save() -> None:
    from trainprobe.mcp.tools.triage import summarise

    run = slow_run()
    terminal, as_json = _triage(run), _triage(run, "--json")
    assert terminal.returncode == as_json.returncode == 0, terminal.stderr + as_json.stderr
    doc = json.loads(as_json.stdout)
    texts = {
        "terminal": " ".join(terminal.stdout.split()),
        "json": " ".join("\n".join(line for a in doc["answers"].values() for line in a["lines"]).split()),
        "mcp": " ".join(summarise(doc).text(None).split()),
    }

    # Identical tensors here are frozen layers: said once, with the counts and why it is no stale save.
    frozen = (
        f"frozen layers: checkpoints/step_20/state.pt (step 20) shares {2 * SLOW_FROZEN} of its 48 tensors "
        "with checkpoints/step_10/state.pt (step 10), no optimizer moment among them and its 20 moment(s) "
        "moved: frozen layers (or parameters the optimizer does not update), not a stale save"
    )
    for where, text in texts.items():
        assert frozen in text, where
        assert "nothing: every one of 2 checkpoint(s) is finite and not torn" in text, where

    # None of the careful run's findings: no stale save or relabel, no tear, no fact, no cause.
    for where, text in texts.items():
        for finding in ("stale: ", "torn: ", "fact: ", "misleading name", "step disagreement", "copies"):
            assert finding not in text, (where, finding)
    assert doc["verdict"] == "healthy"
    assert (doc["conclusions"], doc["facts"], doc["disagreements"], doc["duplicates"]) == ([], [], [], [])
    assert {u["verdict"] for u in doc["units"]} == {"consistent"}
    assert [list(u["between"]) for u in doc["units"]] == [[], ["frozen"]]
    assert doc["resume_from"]["relpath"] == "checkpoints/step_20/state.pt"
