"""``diff --on``: trainprobe.checkpoint shipped through ssh to a Python that has only numpy; the diff document
is the one a local diff gives, for one target and for a fleet (the same two paths on each)."""

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
from trainprobe.checkpoint.diff import diff_paths
from trainprobe.errors import CheckpointError, TrainprobeError
from trainprobe.tasks import diff_on, diff_on_fleet

TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))


@pytest.fixture(scope="module")
def steps() -> Iterator[tuple[Path, Path]]:
    """Two real torch checkpoints of one AdamW run, a step apart, where the ssh users can read them."""
    torch = pytest.importorskip("torch")
    root = Path(tempfile.mkdtemp(prefix="tp-diff-on-"))
    root.chmod(0o755)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    paths = []
    for step in (1, 2):
        model(torch.randn(4, 8)).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        path = root / f"step-{step}.pt"
        torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
        path.chmod(0o644)
        paths.append(path)
    yield paths[0], paths[1]
    shutil.rmtree(root, ignore_errors=True)


def local(a: Path, b: Path) -> Any:
    return json.loads(json.dumps(diff_paths(str(a), str(b)).to_json()))


def test_diff_on_a_local_target_is_the_local_diff(steps: tuple[Path, Path]) -> None:
    a, b = steps
    document = diff_on("local", str(a), str(b))
    assert document == local(a, b)
    assert document["summary"] == {"changed": 16}


@pytest.mark.ssh
def test_diff_on_through_ssh_with_only_numpy(
    sshd: SshServer, numpy_venv: Path, steps: tuple[Path, Path]
) -> None:
    a, b = steps
    assert diff_on(f"{sshd.target('zsh')}//python={numpy_venv}", str(a), str(b)) == local(a, b)


@pytest.mark.ssh
def test_a_path_that_is_no_checkpoint_there_is_the_local_error(
    sshd: SshServer, numpy_venv: Path, steps: tuple[Path, Path]
) -> None:
    target = f"{sshd.target('fish')}//python={numpy_venv}"
    with pytest.raises(TrainprobeError) as here:
        diff_paths("/nowhere/a.pt", str(steps[1]))
    with pytest.raises(TrainprobeError) as far:
        diff_on(target, "/nowhere/a.pt", str(steps[1]))
    assert isinstance(here.value, CheckpointError)
    assert type(far.value) is type(here.value)
    assert far.value.exit_code == here.value.exit_code == 2
    assert str(far.value) == f"{target}: {here.value}"


@pytest.mark.ssh
def test_diff_on_a_fleet_and_the_cli(
    sshd: SshServer, numpy_venv: Path, steps: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = steps
    targets = [f"{sshd.target(shell)}//python={numpy_venv}" for shell in ("bash", "tcsh")]
    fleet = diff_on_fleet(targets, str(a), str(b))
    assert fleet.exit_code == 0
    assert fleet.reports == {t: local(a, b) for t in targets}

    env = {**os.environ, "COLUMNS": "200", "TRAINPROBE_RUNS_DIR": str(tmp_path / "runs")}

    def diff(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TRAINPROBE, "diff", str(a), str(b), *args], capture_output=True, text=True, env=env
        )

    far, here = diff("--on", targets[0]), diff()
    assert (far.returncode, far.stdout) == (here.returncode, here.stdout), far.stderr
    many = diff("--json", "--on", targets[0], "--on", targets[1])
    document = json.loads(many.stdout)
    assert many.returncode == 0, many.stderr
    assert [t["result"] for t in document["targets"]] == [local(a, b)] * 2
    table = diff("--on", targets[0], "--on", targets[1])
    assert table.stdout.count("16 tensor(s): 16 changed") == 2
    assert "2 targets: 2 ok" in table.stdout
