"""The seed's situation end to end: a far machine behind ssh with a zsh login shell and numpy only in a venv,
a run dir with a Python-logging log and per-step checkpoint folders written by the real race. One
``trainprobe triage --on`` gives the four answers, the duplicate and the step disagreement."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from trainprobe.checkpoint import verdict as V
from trainprobe.checkpoint.check import check_paths
from triage.runs import SEED_BLOWUP, SEED_EVERY, SEED_LOG_PATH, SEED_STEPS, seed_run

pytestmark = [pytest.mark.slow, pytest.mark.ssh]
OPTIONS = ["--threshold", "6", "--stall-floor", "5", "--event", "lr changed to"]


def _timeless(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("seconds", "target", "host")}


def test_one_triage_on_a_zsh_host_answers_the_seeds_four_questions(
    sshd: object, numpy_venv: Path, cli: Any
) -> None:
    from fixtures.sshd import SshServer

    assert isinstance(sshd, SshServer)
    assert subprocess.run([str(numpy_venv), "-c", "import trainprobe"], capture_output=True).returncode
    run = seed_run()
    target = f"{sshd.target('zsh')}//python={numpy_venv}"
    result = cli("triage", "--on", target, str(run), "--json", *OPTIONS)
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["target"] == target
    assert doc["problems"] == []  # the Python-logging log was read
    units = {c["relpath"]: c for c in doc["units"]}
    checked = {r.path: r for r in check_paths([str(run)]).results}
    assert {c["path"]: (c["verdict"], c["step"]) for c in units.values()} == {
        p: (r.verdict, r.step) for p, r in checked.items()
    }  # the verdict and step `check` gives, unit by unit

    # Every save line named /scratch/exp3/checkpoints/step_N; the run was copied since: matched by the path's
    # tail, except step 20's, whose folder says 25 (matched by the step its file holds).
    saves = {s["step"]: (s["unit"], s["matched_by"]) for s in doc["saves"]}
    assert all(s["path"].startswith(SEED_LOG_PATH) for s in doc["saves"])
    expected = {
        s: (f"checkpoints/step_{s}/state.pt", "path") for s in range(SEED_EVERY, SEED_STEPS + 1, SEED_EVERY)
    }
    expected[20] = ("checkpoints/step_25/state.pt", "step")
    assert saves == expected
    (disagreement,) = doc["disagreements"]
    assert disagreement["unit"] == "checkpoints/step_25/state.pt"
    assert disagreement["steps"] == {"step field": 20, "directory": 25}
    assert (disagreement["trusted"], disagreement["step"]) == ("step field", 20)
    (duplicate,) = doc["duplicates"]
    assert sorted(duplicate["units"]) == ["checkpoints/best/state.pt", "checkpoints/step_30/state.pt"]
    assert duplicate["bytes"] is True

    answers = doc["answers"]
    assert list(answers) == ["broken", "logs", "causes", "resume"]
    # (a) NaN/Inf by tensor in the saves after the blow-up; torn units by their step groups, as check says.
    nonfinite = {n["unit"] for n in answers["broken"]["nonfinite"]}
    assert nonfinite == {"checkpoints/step_50/state.pt", "checkpoints/step_60/state.pt"}
    assert all(any(t["optimizer_state"] for t in n["tensors"]) for n in answers["broken"]["nonfinite"])
    torn = {t["unit"] for t in answers["broken"]["torn"]}
    assert torn == {c["relpath"] for c in units.values() if "torn" in c["findings"]}
    assert all(t["step_groups"] for t in answers["broken"]["torn"] if "counters" in t["reason"])
    broken = "\n".join(answers["broken"]["lines"])
    assert "byte-identical copies: checkpoints/best/state.pt, checkpoints/step_30/state.pt" in broken
    assert "step disagreement: checkpoints/step_25/state.pt" in broken
    # (b) the log: the loss goes non-finite right after the learning rate of 1e30.
    assert any(
        f["kind"] == "non_finite" and f["metric"] == "loss" and f["step"] == SEED_BLOWUP + 1
        for f in answers["logs"]["findings"]
    )
    # (c) a gradient explosion, the NaN in the next unit's optimizer state.
    (explosion,) = [c for c in doc["conclusions"] if c["cause"] == "gradient-explosion"]
    assert (explosion["step"], explosion["confidence"]) == (SEED_BLOWUP + 1, "high")
    assert explosion["checkpoint"] == units["checkpoints/step_50/state.pt"]["path"]
    # (d) the latest healthy unit before the first lasting anomaly.
    resume = answers["resume"]
    lasting = min(c["step"] for c in doc["conclusions"] if any(a["kind"] != "spike" for a in c["anomalies"]))
    healthy = [c for c in units.values() if V.exit_code([c["verdict"]]) == 0 and c["step"] < lasting]
    assert resume["unit"] == max(healthy, key=lambda c: c["step"])["relpath"]
    assert resume["lines"][0].startswith(f"resume from {resume['unit']}")

    # Every option travelled: the far side's evidence, concluded here, equals a local triage with them.
    local = cli("triage", str(run), "--json", *OPTIONS)
    assert _timeless(json.loads(local.stdout)) == _timeless(doc)
    # The human form gives the same, in the same order.
    text = " ".join(cli("triage", "--on", target, str(run), *OPTIONS).stdout.split())
    order = ["what is broken where", "byte-identical copies", "step disagreement", "what the logs show",
             "what caused what", "gradient explosion at step 46", "where to resume"]  # fmt: skip
    assert [text.index(o) for o in order] == sorted(text.index(o) for o in order)
