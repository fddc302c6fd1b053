"""`trainprobe triage` as a user runs it: terminal summary, --json, --html in Chromium, exit codes, --on."""

from __future__ import annotations

import io
import itertools
import json
import math
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from triage.runs import BLOWUP, STALL_FLOOR, story_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLOOR = ["--stall-floor", str(STALL_FLOOR)]


def _said(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.slow
def test_terminal_summary_tells_the_story(cli: Any) -> None:
    run = story_run("naive", True)
    result = cli("triage", str(run), *FLOOR)
    assert result.exit_code == 1, result.output
    out = _said(result.stdout)
    assert f"{run}: 1 log file(s), 4 checkpoint(s)" in out
    assert re.search(r"step \d+: the checkpoint save at step \d+ raced training: \S+ is torn \(high", out)
    assert "is torn: optimizer: per-parameter step counters disagree" in out
    assert f"step {BLOWUP}: a gradient explosion at step {BLOWUP} blew up the optimizer state" in out
    assert re.search(r"no checkpoint to resume from: no checkpoint is healthy before step \d+", out)
    assert "verdict: problems found" in out
    order = ["what is broken where", "what the logs show", "what caused what", "where to resume"]
    assert [out.index(o) for o in order] == sorted(out.index(o) for o in order)


@pytest.mark.slow
def test_healthy_run_exits_0(cli: Any) -> None:
    result = cli("triage", str(story_run("writer", False)), *FLOOR)
    assert result.exit_code == 0, result.output
    out = _said(result.stdout)
    assert "no anomalies in the 1 log file(s) read" in out
    assert "resume from ckpt/step-00000200.pt (step 200)" in out
    assert "verdict: healthy" in out


@pytest.mark.slow
def test_json_is_one_document_with_the_resume_point(cli: Any) -> None:
    result = cli("triage", str(story_run("writer", True)), "--json", *FLOOR)
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["schema_version"] == 3
    assert doc["summary"]["causes"] == ["gradient-explosion"]
    assert doc["resume_from"]["step"] == 150
    assert doc["resume_from"]["path"].endswith("ckpt/step-00000150.pt")
    assert doc["conclusions"][0]["checkpoint"].endswith("ckpt/step-00000200.pt")


def test_usage_errors_exit_2(tmp_path: Path, cli: Any) -> None:
    missing = cli("triage", str(tmp_path / "nope"))
    assert missing.exit_code == 2
    assert "no such file or directory" in _said(missing.stderr)
    (tmp_path / "empty").mkdir()
    empty = cli("triage", str(tmp_path / "empty"))
    assert empty.exit_code == 2
    assert "no training log and no checkpoint found" in _said(empty.stderr)
    (tmp_path / "prose").mkdir()
    (tmp_path / "prose" / "notes.txt").write_text("we changed the optimizer today\nand it went fine\n")
    prose = cli("triage", str(tmp_path / "prose"))
    assert prose.exit_code == 2
    assert "no checkpoint, and no metric rows in its logs" in _said(prose.stderr)
    bad_target = cli("triage", "--on", "ssh=", str(tmp_path))
    assert bad_target.exit_code == 2


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium; .ci/run does)"
)
def test_html_report_renders_in_headless_chromium(tmp_path: Path, cli: Any) -> None:
    html = tmp_path / "triage.html"
    result = cli("triage", str(story_run("naive", True)), "--html", str(html), "-q", *FLOOR)
    assert result.exit_code == 1
    text = html.read_text()
    assert "https://" not in text
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [
                CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--dump-dom", html.as_uri(),
            ],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert "<title>trainprobe triage report</title>" in dom
    assert 'data-charts="3"' in dom  # our script ran over the loss, acc and lr curves
    assert dom.count('class="curve"') >= 3
    assert 'data-cause="save-race"' in dom
    assert 'data-cause="gradient-explosion"' in dom
    answers = [dom.index(f'data-answer="{a}"') for a in ("broken", "logs", "causes", "resume")]
    assert answers == sorted(answers)
    assert dom.count('class="save"') == 4 * 3  # every save on every curve
    assert dom.count('class="stall"') >= 3  # the naive saves stall logging
    assert 'class="anomaly non_finite"' in dom
    lane = dom[dom.index('<svg class="lane"') :]
    assert lane.count('class="ckpt ') == 4  # each unit on the step axis, coloured by its verdict
    assert lane.count('class="ckpt nonfinite"') == 1
    assert 'class="ckpt torn"' in lane
    assert dom.count('class="ckpt-row"') == 4
    axes = set(re.findall(r'data-ticks="([^"]+)"', dom))
    assert len(axes) == 1  # the curves and the units share one step axis
    ticks = json.loads(axes.pop().replace("&quot;", '"'))
    assert len(ticks) >= 3
    gaps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(gaps) == 1
    (gap,) = gaps
    mantissa = gap / 10 ** math.floor(math.log10(gap))
    assert round(mantissa, 6) in (1.0, 2.0, 5.0), ticks
    assert all(abs(t / gap - round(t / gap)) < 1e-6 for t in ticks), ticks
    labels = re.findall(r'class="axis x"[^>]*>([^<]+)</text>', lane)
    assert labels == [
        str(int(t)) if float(t).is_integer() else str(t) for t in ticks
    ]  # round numbers printed
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []


@pytest.mark.slow
@pytest.mark.ssh
def test_triage_on_a_target_with_only_numpy(sshd: object, numpy_venv: Path, cli: Any) -> None:
    from fixtures.sshd import SshServer

    assert isinstance(sshd, SshServer)
    assert subprocess.run([str(numpy_venv), "-c", "import trainprobe"], capture_output=True).returncode
    run = story_run("naive", True)
    target = f"{sshd.target('fish')}//python={numpy_venv}"
    remote = cli("triage", "--on", target, str(run), "--json", *FLOOR)
    local = cli("triage", str(run), "--json", *FLOOR)
    assert remote.exit_code == local.exit_code == 1, remote.output
    rdoc, ldoc = json.loads(remote.stdout), json.loads(local.stdout)
    assert rdoc["target"] == target
    assert rdoc["conclusions"] == ldoc["conclusions"]
    assert [c["verdict"] for c in rdoc["units"]] == [c["verdict"] for c in ldoc["units"]]
    missing = cli("triage", "--on", target, str(run / "nope"))
    assert missing.exit_code == 2
    assert "no such file or directory" in _said(missing.stderr)


class _Terminal(io.StringIO):
    """stdout as a colour terminal (what styled() and rich look at), kept as text."""

    def isatty(self) -> bool:
        return True


@pytest.mark.slow
def test_a_torn_unit_is_bold_red_on_a_terminal_as_in_scan_and_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainprobe.cli import main

    run = story_run("naive", True)
    terminal = _Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert main(["triage", str(run), *FLOOR]) == 1
    out = terminal.getvalue()
    assert "\x1b[1;31mtorn" in out  # the one verdict table's style (it was bold yellow in triage)
    assert "\x1b[1;33mtorn" not in out
