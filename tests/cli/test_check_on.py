"""``check --on``: trainprobe.checkpoint shipped through ssh to a Python with only numpy; same verdicts."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.sshd import SshServer

pytestmark = pytest.mark.ssh
TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))


@pytest.fixture(scope="module")
def checkpoints() -> Iterator[Path]:
    """A consistent and a torn checkpoint, real torch files, in a directory the ssh users can read."""
    torch = pytest.importorskip("torch")
    root = Path(tempfile.mkdtemp(prefix="tp-check-on-"))
    root.chmod(0o755)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    opt = torch.optim.AdamW(model.parameters())

    def step() -> None:
        model(torch.randn(2, 4)).sum().backward()
        opt.step()

    step()
    torch.save({"step": 1, "model": model.state_dict(), "optimizer": opt.state_dict()}, root / "good.pt")
    old = copy.deepcopy(opt.state_dict())
    step()
    torn = opt.state_dict()
    torn["state"][3] = old["state"][3]
    torch.save({"step": 2, "model": model.state_dict(), "optimizer": torn}, root / "torn.pt")
    for path in root.iterdir():
        path.chmod(0o644)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_check_on_gives_the_local_verdicts(sshd: SshServer, numpy_venv: Path, checkpoints: Path) -> None:
    target = f"{sshd.target('zsh')}//python={numpy_venv}"
    paths = [str(checkpoints / "good.pt"), str(checkpoints / "torn.pt")]
    remote = subprocess.run(
        [TRAINPROBE, "check", "--json", "--on", target, *paths], capture_output=True, text=True
    )
    local = subprocess.run([TRAINPROBE, "check", "--json", *paths], capture_output=True, text=True)
    assert remote.returncode == local.returncode == 1, remote.stderr
    assert json.loads(remote.stdout) == json.loads(local.stdout)
    verdicts = [c["verdict"] for c in json.loads(remote.stdout)["units"]]
    assert verdicts == ["consistent", "torn"]


def test_check_on_human_output(sshd: SshServer, numpy_venv: Path, checkpoints: Path) -> None:
    target = f"{sshd.target('bash')}//python={numpy_venv}"
    proc = subprocess.run(
        [TRAINPROBE, "check", "--on", target, str(checkpoints / "torn.pt")], capture_output=True, text=True
    )
    assert proc.returncode == 1, proc.stderr
    assert "✗ TORN" in proc.stdout
    assert "per-parameter step counters disagree" in proc.stdout


def test_check_on_a_fleet_reports_per_target(sshd: SshServer, numpy_venv: Path, checkpoints: Path) -> None:
    on_zsh = f"{sshd.target('zsh')}//python={numpy_venv}"
    on_bash = f"{sshd.target('bash')}//python={numpy_venv}"
    good = str(checkpoints / "good.pt")
    proc = subprocess.run(
        [TRAINPROBE, "check", good, "--on", on_zsh, "--on", on_bash], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.index(on_zsh) < proc.stdout.index("✓ consistent") < proc.stdout.index(on_bash)
    assert proc.stdout.count("1 consistent") >= 2  # each target's report, then its table row
    data = json.loads(
        subprocess.run(
            [TRAINPROBE, "check", "--json", str(checkpoints / "torn.pt"), "--on", on_zsh, "--on", on_bash],
            capture_output=True,
            text=True,
        ).stdout
    )
    assert data["exit_code"] == 1
    assert [t["result"]["units"][0]["verdict"] for t in data["targets"]] == ["torn", "torn"]
    with_dead = subprocess.run(
        [TRAINPROBE, "check", good, "--on", on_zsh, "--on", "ssh=127.0.0.1:1"], capture_output=True, text=True
    )
    assert with_dead.returncode == 1  # a target that could not check is a failure
    assert "unreachable" in with_dead.stdout
