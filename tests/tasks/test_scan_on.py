"""``scan --on``: trainprobe.checkpoint shipped through ssh to a Python that has only numpy; same report."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.sshd import SshServer
from trainprobe.checkpoint import scan
from trainprobe.errors import InterpreterNotFoundError
from trainprobe.remote import call
from trainprobe.tasks import scan_on

pytestmark = pytest.mark.ssh
TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))


@pytest.fixture(scope="module")
def checkpoints() -> Iterator[Path]:
    """Real torch-written checkpoints (one with NaN/Inf) in a directory the ssh users can read."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    root = Path(tempfile.mkdtemp(prefix="tp-scan-on-"))
    root.chmod(0o755)
    model = torch.nn.Linear(4, 3)
    torch.save(model.state_dict(), root / "clean.pt")
    bad = {"w": torch.ones(5, 5), "b": torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])}
    save_file(bad, str(root / "bad.safetensors"))
    for path in root.iterdir():
        path.chmod(0o644)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def without_timings(report: dict[str, Any]) -> dict[str, Any]:
    report = json.loads(json.dumps(report))
    report["totals"].pop("seconds")
    for f in report["files"]:
        f["totals"].pop("seconds")
    return report


def test_scan_on_matches_a_local_scan(sshd: SshServer, numpy_venv: Path, checkpoints: Path) -> None:
    assert subprocess.run([str(numpy_venv), "-c", "import trainprobe"], capture_output=True).returncode
    paths = [str(checkpoints / "*.pt"), str(checkpoints / "bad.safetensors")]  # the glob expands far side
    local = scan(paths, stats=True)
    remote = scan_on(f"{sshd.target('fish')}//python={numpy_venv}", paths, stats=True)
    assert local.exit_code == 1
    assert without_timings(remote.to_json()) == without_timings(local.to_json())


def test_scan_on_without_numpy_far_side_says_so(sshd: SshServer, checkpoints: Path) -> None:
    with pytest.raises(InterpreterNotFoundError, match="no interpreter has numpy") as info:
        scan_on(sshd.target("dash"), [str(checkpoints)])
    assert "/usr/bin/python3 (3." in str(info.value)


def test_cli_scan_on(sshd: SshServer, numpy_venv: Path, checkpoints: Path) -> None:
    target = f"{sshd.target('bash')}//python={numpy_venv}"
    proc = subprocess.run(
        [TRAINPROBE, "scan", "--json", "--on", target, str(checkpoints / "bad.safetensors")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stderr
    document = json.loads(proc.stdout)
    assert document["totals"]["nonfinite"] == 3


def test_call_ships_a_module_from_outside_trainprobe(sshd: SshServer, tmp_path: Path) -> None:
    module = tmp_path / "tp_shipped_helper.py"
    module.write_text("import os\n\ndef where(x, *, y):\n    return [x + y, os.getuid()]\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import tp_shipped_helper  # type: ignore[import-not-found]

        value = call(sshd.target("zsh"), tp_shipped_helper.where, 40, y=2)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("tp_shipped_helper", None)
    assert value[0] == 42
    assert value[1] != 0  # it ran as the ssh user, not here
