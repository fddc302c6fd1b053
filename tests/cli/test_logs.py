"""`trainprobe logs` as a user runs it: exit codes, the JSON document, the HTML report in a real Chromium,
PNG."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from metrics.synthetic import write_seed_story

REAL_LOGS = Path(__file__).parents[1] / "data" / "real-logs"
LLMC = REAL_LOGS / "modded-nanogpt__2024-10-13_llmc" / "main.log"


@pytest.fixture
def seed_log(tmp_path: Path) -> Path:
    return write_seed_story(tmp_path / "train.log")


def test_seed_story_terminal_report_and_exit_code(seed_log: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trainprobe", "logs", str(seed_log)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert out.index("2029") < out.index("4021") < out.index("4229") < out.index("logging stalled 170 s")
    assert "29 steps after the checkpoint save at step 2000, which stalled logging 170 s" in out
    assert "scan and check the checkpoint saved at step 2000" in out
    assert "3 error, 2 warning, 0 info" in out


def test_json_document(seed_log: Path, cli: Any) -> None:
    result = cli("logs", str(seed_log), "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["schema_version"] == 3
    assert [(f["kind"], f["step"]) for f in doc["findings"]][:3] == [
        ("spike", 2029),
        ("spike", 4021),
        ("cliff", 4229),
    ]


def test_fail_on_levels(seed_log: Path, cli: Any) -> None:
    assert cli("logs", str(LLMC), "-q").exit_code == 0  # healthy: info only
    assert cli("logs", str(LLMC), "-q", "--fail-on", "info").exit_code == 1
    assert cli("logs", str(seed_log), "-q", "--fail-on", "never").exit_code == 0


def _said(text: str) -> str:
    return " ".join(text.split())  # rich wraps long lines


def test_usage_errors_exit_2(tmp_path: Path, cli: Any) -> None:
    result = cli("logs", str(tmp_path / "nope.log"))
    assert result.exit_code == 2
    assert "no such file or directory — check the path" in _said(result.stderr)
    empty = tmp_path / "empty.log"
    empty.write_text("hello\nworld\n")
    result = cli("logs", str(empty))
    assert result.exit_code == 2
    assert "no metric rows found" in _said(result.stderr)
    result = cli("logs", str(empty), "--event", "(")
    assert result.exit_code == 2
    assert "--event: not a valid regular expression" in _said(result.stderr)


def test_checkpoint_dir_mtimes_are_save_events(tmp_path: Path, cli: Any) -> None:
    lines = [f"step {s} loss {1.0 + (5.0 if s == 130 else 0.0):.2f}" for s in range(200)]
    (tmp_path / "t.log").write_text("\n".join(lines) + "\n")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model_step120.pt").write_bytes(b"x")
    result = cli("logs", str(tmp_path / "t.log"), "--checkpoints", str(ckpt), "--json")
    (spike,) = json.loads(result.stdout)["findings"]
    assert spike["event"]["kind"] == "checkpoint_save"
    assert spike["event"]["step"] == 120


def test_png_report(seed_log: Path, tmp_path: Path, cli: Any) -> None:
    png = tmp_path / "r.png"
    result = cli("logs", str(seed_log), "--png", str(png), "-q")
    assert result.exit_code == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium; .ci/run does)"
)
def test_html_report_renders_in_headless_chromium(seed_log: Path, tmp_path: Path, cli: Any) -> None:
    html = tmp_path / "report.html"
    assert cli("logs", str(seed_log), "--html", str(html), "-q").exit_code == 1
    text = html.read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                "--dump-dom",
                html.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'data-charts="2"' in dom  # our script ran to its end over both charts
    assert dom.count('class="series"') >= 2
    assert dom.count('class="anomaly"') >= 3
    assert 'class="event"' in dom
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []


def test_png_without_matplotlib_names_the_extra(
    seed_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    result = cli("logs", str(seed_log), "--png", str(tmp_path / "r.png"))
    assert result.exit_code == 2
    assert "pip install 'trainprobe[plot]'" in _said(result.stderr)
    assert not (tmp_path / "r.png").exists()


def test_pattern_reads_a_line_shape_it_does_not_know(tmp_path: Path, cli: Any) -> None:
    log = tmp_path / "odd.log"
    rows = [f"<{step}> it's {2.0 - 0.01 * step:.3f} now" for step in range(1, 60)]
    rows[40] = "<41> it's 9.000 now"
    log.write_text("booting\n" + "\n".join(rows) + "\n")
    assert cli("logs", str(log)).exit_code == 2  # no shape it knows: unreadable, as documented
    result = cli("logs", str(log), "--json", "--pattern", r"<(?P<step>\d+)> it's (?P<loss>\S+) now")
    doc = json.loads(result.output)
    assert [(f["metric"], f["step"]) for f in doc["findings"] if f["kind"] == "spike"] == [("loss", 41)]
    bad = cli("logs", str(log), "--pattern", "<(?P<step>")
    assert bad.exit_code == 2
    assert "--pattern: not a valid regular expression" in bad.output
