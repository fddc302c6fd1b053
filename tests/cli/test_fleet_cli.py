"""Fleets on the command line: ``run``, ``probe`` and ``scan --on`` on several real loopback sshd targets."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixtures.sshd import SshServer, SshSetup, free_port

pytestmark = pytest.mark.ssh
TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))

SCRIPT = """\
import socket, sys
print("hello from", sys.argv[1], "{braces} $HOME `id` !!")
print("to stderr", file=sys.stderr)

def main():
    return {"arg": sys.argv[1]}
"""


@dataclass
class Fleet:
    user: str
    port: int

    def target(self, n: int) -> str:
        return f"ssh={self.user}@127.0.1.{n}:{self.port}"


@pytest.fixture(scope="module")
def fleet(ssh_setup: SshSetup, sshd: SshServer) -> Fleet:
    """sshd on 127.0.1.2 and 127.0.1.3 (one port); nothing listens on 127.0.1.9 at that port."""
    port = free_port("127.0.1.2")
    for n in (2, 3):
        ssh_setup.start(f"127.0.1.{n}", port)
    return Fleet(ssh_setup.users["bash"], port)


def trainprobe(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TRAINPROBE, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env={**os.environ}
    )


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "hello.py"
    path.write_text(SCRIPT)
    return path


def test_run_on_a_fleet_shows_prefixed_output_a_table_and_exits_1_for_a_dead_target(
    fleet: Fleet, script: Path
) -> None:
    dead = fleet.target(9)
    proc = trainprobe(
        "run", "--on", f"ssh={fleet.user}@127.0.1.[2-3]:{fleet.port}", "--on", dead, str(script),
        "--connect-timeout", "5", "--", "A1",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    label = fleet.target(2).ljust(len(dead))
    assert f"{label} | hello from A1 {{braces}} $HOME `id` !!\n" in proc.stdout
    assert f"{fleet.target(3).ljust(len(dead))} | to stderr\n" in proc.stderr
    rows = {line.split("│")[1].strip(): line for line in proc.stdout.splitlines() if "│" in line}
    assert "│ ok " in rows[fleet.target(2)]
    assert '{"arg":"A1"}' in rows[fleet.target(2)]
    assert "│ unreachable │ 255 " in rows[dead]
    assert "3 targets: 2 ok, 1 unreachable in" in proc.stdout
    assert f"✗ {dead} unreachable" in proc.stderr
    log_dir = Path(proc.stdout.split("logs: ")[1].split()[0])
    assert json.loads((log_dir / "fleet.json").read_text())["counts"] == {
        "total": 3,
        "ok": 2,
        "unreachable": 1,
    }


def test_run_on_a_fleet_json_and_all_ok_exits_0(fleet: Fleet, script: Path) -> None:
    proc = trainprobe("run", f"ssh={fleet.user}@127.0.1.[2-3]:{fleet.port}", str(script), "--json", "--", "B")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # stdout is exactly one JSON document; live output went to stderr
    assert data["exit_code"] == 0
    assert data["counts"] == {"total": 2, "ok": 2}
    assert [t["target"] for t in data["targets"]] == [fleet.target(2), fleet.target(3)]
    assert all(t["result"] == {"arg": "B"} and t["status"] == "ok" for t in data["targets"])
    assert "| hello from B" in proc.stderr


def test_named_targets_and_groups_from_the_config_file(fleet: Fleet, script: Path, tmp_path: Path) -> None:
    config = tmp_path / "targets.toml"
    config.write_text(
        f'[targets]\ntwo = "{fleet.target(2)}"\n\n[groups]\npair = ["two", "{fleet.target(3)}"]\n'
    )
    proc = trainprobe("run", "pair", str(script), "--config", str(config), "--json", "--quiet", "--", "C")
    assert proc.returncode == 0, proc.stderr
    assert [t["target"] for t in json.loads(proc.stdout)["targets"]] == [fleet.target(2), fleet.target(3)]
    assert proc.stderr == ""  # --quiet: no live output, no notes
    # one name alone is a single run: the plain single-target output, no table
    single = trainprobe("run", "two", str(script), "--config", str(config), "--", "D")
    assert single.returncode == 0, single.stderr
    assert single.stdout == "hello from D {braces} $HOME `id` !!\n"
    unknown = trainprobe("run", "nosuch", str(script), "--config", str(config))
    assert unknown.returncode == 2
    assert "'nosuch' is neither a target string nor a name in" in unknown.stderr
    assert "names there: pair, two" in unknown.stderr


def test_probe_a_fleet(fleet: Fleet) -> None:
    proc = trainprobe("probe", fleet.target(2), fleet.target(3), fleet.target(9), "--no-cuda", "--json")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    by_target = {t["target"]: t for t in data["targets"]}
    assert by_target[fleet.target(9)]["status"] == "unreachable"
    for n in (2, 3):
        report = by_target[fleet.target(n)]["result"]
        assert report["user"] == fleet.user
        assert report["interpreters"]
    human = trainprobe("probe", fleet.target(2), fleet.target(3), "--no-cuda")
    assert human.returncode == 0, human.stderr
    assert human.stdout.count("Python interpreters (discovery order)") == 2
    assert "2 targets: 2 ok in" in human.stdout


@pytest.fixture(scope="module")
def shard_dirs() -> Iterator[tuple[Path, Path]]:
    """Two directories holding a real torch-written ``model.safetensors`` each; the second has NaN/Inf."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    root = Path(tempfile.mkdtemp(prefix="tp-fleet-scan-"))
    clean, bad = root / "clean", root / "bad"
    for directory in (root, clean, bad):
        directory.mkdir(exist_ok=True)
        directory.chmod(0o755)
    save_file({"w": torch.ones(3, 3)}, str(clean / "model.safetensors"))
    save_file({"w": torch.tensor([1.0, float("nan"), float("inf")])}, str(bad / "model.safetensors"))
    for path in root.rglob("*.safetensors"):
        path.chmod(0o644)
    yield clean, bad
    shutil.rmtree(root, ignore_errors=True)


def test_scan_on_a_fleet_reports_per_target(
    fleet: Fleet, numpy_venv: Path, shard_dirs: tuple[Path, Path]
) -> None:
    clean, bad = shard_dirs
    on_clean = f"{fleet.target(2)}//python={numpy_venv}//cd={clean}"
    on_bad = f"{fleet.target(3)}//python={numpy_venv}//cd={bad}"
    proc = trainprobe("scan", "model.safetensors", "--on", on_clean, "--on", on_bad)
    assert proc.returncode == 1, proc.stderr  # one target found NaN/Inf
    assert proc.stdout.index(on_clean) < proc.stdout.index("✓ clean") < proc.stdout.index(on_bad)
    assert "✗ NON-FINITE" in proc.stdout.split(on_bad)[1]
    assert "1 file(s), 1 tensors: 2 non-finite in 1 tensor(s)" in proc.stdout
    data = json.loads(
        trainprobe("scan", "model.safetensors", "--on", on_clean, "--on", on_bad, "--json").stdout
    )
    assert data["exit_code"] == 1
    assert [t["result"]["totals"]["nonfinite"] for t in data["targets"]] == [0, 2]
    only_clean = trainprobe("scan", "model.safetensors", "--on", on_clean, "--on", fleet.target(9))
    assert only_clean.returncode == 1  # a target that could not scan is a failure too
    assert "unreachable" in only_clean.stdout
