"""``logs --on``: trainprobe.metrics shipped through ssh to a Python that has only numpy; the LogReport that
comes back is the one a local analysis gives (terminal report, JSON, HTML), for one target and a fleet."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.sshd import SshServer
from metrics.synthetic import write_seed_story
from trainprobe.errors import TrainprobeError
from trainprobe.metrics import LogReport, Options, analyze
from trainprobe.tasks import logs_on, logs_on_fleet

TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))


@pytest.fixture(scope="module")
def run_dir() -> Iterator[Path]:
    """The seed's story log (a spike 29 steps after a save that stalled 170 s, a cliff) where the ssh users
    can read it."""
    root = Path(tempfile.mkdtemp(prefix="tp-logs-on-"))
    root.chmod(0o755)
    write_seed_story(root / "train.log").chmod(0o644)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def same(report: LogReport) -> Any:
    return json.loads(json.dumps(report.to_json(series=True)))


def test_logs_on_a_local_target_is_the_local_analysis(run_dir: Path) -> None:
    options = Options(threshold=5.0, event_patterns=["Saving checkpoint"])
    local = analyze([run_dir / "train.log"], options=options)
    far = logs_on("local", [run_dir / "train.log"], options=options)
    assert same(far) == same(local)
    assert [(f.kind, f.step) for f in far.findings] == [(f.kind, f.step) for f in local.findings]
    assert far.findings[0].event is not None  # the event a finding is tied to comes back with it


@pytest.mark.ssh
def test_logs_on_through_ssh_with_only_numpy(sshd: SshServer, numpy_venv: Path, run_dir: Path) -> None:
    assert subprocess.run([str(numpy_venv), "-c", "import trainprobe"], capture_output=True).returncode
    far = logs_on(f"{sshd.target('zsh')}//python={numpy_venv}", [str(run_dir / "train.log")])
    assert same(far) == same(analyze([run_dir / "train.log"]))
    assert "logging stalled 170 s" in " ".join(f.message for f in far.findings)


@pytest.mark.ssh
def test_a_log_missing_far_side_is_the_local_error(sshd: SshServer, numpy_venv: Path) -> None:
    target = f"{sshd.target('fish')}//python={numpy_venv}"
    with pytest.raises(TrainprobeError) as here:
        analyze(["/nowhere/train.log"])
    with pytest.raises(TrainprobeError) as far:
        logs_on(target, ["/nowhere/train.log"])
    assert type(far.value) is type(here.value)  # the class, so the exit code, a local run has
    assert far.value.exit_code == here.value.exit_code == 2
    assert str(far.value) == f"{target}: {here.value}"
    assert "/nowhere/train.log: no such file" in str(far.value)


@pytest.mark.ssh
def test_logs_on_a_fleet_one_report_each(sshd: SshServer, numpy_venv: Path, run_dir: Path) -> None:
    targets = [f"{sshd.target(shell)}//python={numpy_venv}" for shell in ("bash", "tcsh")] + [
        f"{sshd.target('dash')}//python={numpy_venv}//cd=/nowhere"  # cannot start there: a failed target
    ]
    fleet = logs_on_fleet(targets, [str(run_dir / "train.log")])
    assert sorted(fleet.reports) == sorted(targets[:2])
    local = same(analyze([run_dir / "train.log"]))
    assert all(same(report) == local for report in fleet.reports.values())
    assert fleet.exit_code == 1
    assert [o.ok for o in fleet.fleet.outcomes] == [True, True, False]


@pytest.mark.ssh
def test_cli_logs_on_prints_what_a_local_run_prints(
    sshd: SshServer, numpy_venv: Path, run_dir: Path, tmp_path: Path
) -> None:
    target = f"{sshd.target('bash')}//python={numpy_venv}"
    env = {**os.environ, "COLUMNS": "200", "TRAINPROBE_RUNS_DIR": str(tmp_path / "runs")}
    log = str(run_dir / "train.log")

    def logs(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([TRAINPROBE, "logs", *args], capture_output=True, text=True, env=env)

    far, here = logs(log, "--on", target), logs(log)
    assert (far.returncode, here.returncode) == (1, 1), far.stderr
    assert far.stdout == here.stdout
    far_json, here_json = logs(log, "--json", "--on", target), logs(log, "--json")
    assert json.loads(far_json.stdout) == json.loads(here_json.stdout)
    html = tmp_path / "report.html"
    assert logs(log, "-q", "--on", target, "--html", str(html)).returncode == 1
    assert "logging stalled 170 s" in html.read_text()
    fleet = logs(log, "--json", "--on", target, "--on", f"{sshd.target('zsh')}//python={numpy_venv}")
    document = json.loads(fleet.stdout)
    assert fleet.returncode == 1
    assert [t["status"] for t in document["targets"]] == ["ok", "ok"]
    assert all(t["result"] == json.loads(here_json.stdout) for t in document["targets"])
    refused = logs(log, "--on", target, "--on", sshd.target("zsh"), "--png", str(tmp_path / "x.png"))
    assert refused.returncode == 2
    assert "--html and --png take one target" in refused.stderr
