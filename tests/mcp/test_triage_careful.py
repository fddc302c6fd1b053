"""Issue 23's acceptance test: one ``trainprobe triage --on 'ssh=USER@host//venv=~/venv' '~/run'`` says
everything the careful engineer said of the run (tests/triage/careful_run.py: the real race's torn file, a
fresh optimizer's state under later counters, a byte copy under a misleading name, a stale relabel with NaN,
a Python-logging log naming another directory, a constant rate, a save off its cadence, a save that stalled
the loop, an accuracy cliff with the loss steady), in the terminal, in ``--json`` and in the MCP triage
tool's summary. The far side is the loopback sshd, as a zsh login user whose numpy is only in ``~/venv``
and whose run is in ``~/run``.

Each block below is one point of the issue, with the words the user reads; ``said`` checks them in all three.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_harness import McpSession, text_of

from fixtures.sshd import SshServer
from remote.home_run import HomeUser, home_user
from triage.careful_run import LOG_DIR, RATE, careful_run

pytestmark = [pytest.mark.slow, pytest.mark.ssh, pytest.mark.usefixtures("sshd")]
TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))


@pytest.fixture(scope="module")
def user(sshd: SshServer) -> HomeUser:
    run = careful_run()
    return home_user(sshd, "carezsh", lambda home_run: shutil.copytree(run, home_run))


def _triage(target: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TRAINPROBE, "triage", "--on", target, "~/run", *options],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "400"},
    )


def _joined(text: str) -> str:
    return " ".join(text.split())


def _json_lines(doc: dict[str, Any]) -> str:
    """Every sentence the JSON document gives a reader: the four answers' lines and each conclusion's title,
    confidence and evidence, as the terminal puts them together."""
    lines = [line for answer in doc["answers"].values() for line in answer["lines"]]
    for c in doc["conclusions"]:
        lines += [f"step {c['step']}: {c['title']} ({c['confidence']} confidence)", *c["evidence"]]
    return _joined("\n".join(lines))


def test_one_triage_on_a_zsh_home_says_what_the_careful_engineer_said(
    user: HomeUser, allowing: McpSession
) -> None:
    target = user.target("venv=~/venv")
    terminal = _triage(target)
    as_json = _triage(target, "--json")
    assert terminal.returncode == as_json.returncode == 1, terminal.stderr + as_json.stderr
    doc = json.loads(as_json.stdout)
    mcp = allowing.call("triage", {"run_dir": "~/run", "target": target})
    assert not mcp.is_error, text_of(mcp)
    texts = {"terminal": _joined(terminal.stdout), "json": _json_lines(doc), "mcp": _joined(text_of(mcp))}

    def said(*phrases: str) -> None:
        for where, text in texts.items():
            for phrase in phrases:
                assert phrase in text, f"{where} does not say: {phrase}"

    run = user.home / "run"
    units = {u["relpath"]: u for u in doc["units"]}
    causes = {(c["cause"], c["step"]): c for c in doc["conclusions"]}

    # `~` on the far side: the home of the login user, the venv's Python, and the Python-logging log read.
    assert doc["run_dir"] == str(run)
    assert doc["target"] == target
    assert doc["log_files"] == [str(run / "train.log")]
    assert doc["problems"] == []
    assert mcp.structured_content["run_dir"] == str(run)

    # A stale, relabelled checkpoint: step 40's tensors under step 100, with the count of identical tensors.
    said(
        "stale: checkpoints/step_100/state.pt (step 100) holds the state of checkpoints/step_40/state.pt "
        "(step 40): 53 of its 72 tensors are bit-identical to that unit's, 36 optimizer moment(s) among "
        "them, while it records step 100",
        "NaN/Inf in checkpoints/step_100/state.pt (step 100): 5 value(s) in 1 tensor(s)",
    )
    stale = units["checkpoints/step_100/state.pt"]
    assert stale["between"]["stale"]["other"] == "checkpoints/step_40/state.pt"
    assert stale["verdict"] == "nonfinite"

    # The resume pick: the unit whose name agrees with its content; the other is the same bytes, misnamed.
    said(
        "resume from checkpoints/step_40/state.pt (step 40)",
        "checkpoints/step_70/state.pt is the same bytes under a misleading name (it says step 70, its "
        "contents step 40)",
    )
    assert doc["resume_from"]["relpath"] == "checkpoints/step_40/state.pt"

    # Impossible optimizer state: moments at zero or one step from zero while the counters say 81.
    said(
        "step 81: checkpoints/step_81/state.pt, saved at step 81, holds a fresh optimizer's state under step "
        "counters of 81: the optimizer was re-initialised, not the run's state saved (high confidence)",
        "of 18 Adam state pair(s), 8 at one step from zero (|exp_avg|/sqrt(exp_avg_sq) = (1−β1)/sqrt(1−β2) = "
        "3.16 in every element",
        "10 with exp_avg and exp_avg",
    )
    assert "moments-vs-counter" in units["checkpoints/step_81/state.pt"]["torn_by"]

    # Causes no stronger than the evidence: the stall and the spike after it are one finding, the torn file
    # that save wrote another, joined by time; neither is the other's cause.
    said(
        "step 61: the checkpoint save at step 60 blocked the loop 172 s and the spike in loss followed the "
        "stall (medium confidence)",
        "step 60: the checkpoint save at step 60 raced training: checkpoints/step_60/state.pt is torn (high "
        "confidence)",
        "joined by time, a separate finding",
        "not ruled out: the save code changed the training state",
    )
    stall, tear = causes[("save-stall", 61)], causes[("save-race", 60)]
    assert stall["related"] == [{"cause": "save-race", "step": 60, "title": tear["title"]}]
    assert tear["anomalies"] == []  # a torn file is no cause of the live run's spike

    # An accuracy cliff while the loss holds (here: keeps falling) is the metric or its pipeline.
    said(
        "step 90: acc fell off a cliff at step 90 while loss kept falling",
        "the metric or its eval pipeline broke, not the model (medium confidence)",
    )
    assert causes[("metric-pipeline", 90)]["alternatives"]

    # The log's own facts, one line each.
    said(
        f"fact: tok/s is {RATE} on every one of its 120 rows, even across the log's 1 stall(s): a measured "
        "rate or time moves; this one is a constant written to the log, not a measurement",
        "fact: the save cadence is irregular: the saves (at steps 20, 40, 60, 81, 100) follow a cadence of "
        "20 steps, but the one at step 81 is 1 step(s) off it (after 80)",
        f"fact: 5 save line(s) name {LOG_DIR} (e.g. {LOG_DIR}/step_20), but the units are in "
        f"{run}/checkpoints: the run was copied or moved",
        "fact: 2 checkpoint unit(s) have no save line in the log, which records 5 save(s): "
        "checkpoints/step_0/state.pt, checkpoints/step_70/state.pt (the same tensors as "
        "checkpoints/step_40/state.pt: a copy)",
    )
    assert [f["kind"] for f in doc["facts"]] == [
        "constant-series",
        "irregular-cadence",
        "saves-named-elsewhere",
        "unit-without-save-line",
    ]

    # One answer: the MCP document is the CLI's, and diff shows check's verdict for the torn unit.
    assert mcp.structured_content["conclusions"] == doc["conclusions"]
    pair = ["~/run/checkpoints/step_40", "~/run/checkpoints/step_60"]
    diff = subprocess.run(
        [TRAINPROBE, "diff", "--on", target, *pair, "--json"], capture_output=True, text=True, timeout=300
    )
    assert diff.returncode == 1, diff.stderr
    torn = units["checkpoints/step_60/state.pt"]["verdict"]
    assert json.loads(diff.stdout)["units"]["b"]["verdict"] == torn == "torn"
