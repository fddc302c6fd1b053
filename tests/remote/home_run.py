"""A zsh login user whose numpy is only in ``~/venv`` and whose run is in ``~/run``: what users write as
``venv=~/venv`` and ``'~/run'`` (issue 23). Shared by tests/remote/test_home_paths.py and
tests/mcp/test_mcp_home.py."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixtures.sshd import SshServer

SYSTEM_PYTHON = "/usr/bin/python3"
#: the one non-finite value of the run's checkpoint
NAN_TENSOR = "layer.weight"


@dataclass(frozen=True)
class HomeUser:
    """The user, its home on the far side (the loopback sshd's machine) and its target string."""

    name: str
    home: Path
    ssh: str

    def target(self, *settings: str) -> str:
        return "//".join([self.ssh, *settings])


def write_safetensors(path: Path, tensors: dict[str, list[float]]) -> None:
    """A float32 safetensors file written by hand (the far side has no torch, nor needs it)."""
    header, data = {}, b""
    for name, values in tensors.items():
        blob = struct.pack(f"<{len(values)}f", *values)
        header[name] = {
            "dtype": "F32",
            "shape": [len(values)],
            "data_offsets": [len(data), len(data) + len(blob)],
        }
        data += blob
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + data)


def make_numpy_venv(venv: Path) -> None:
    """A venv of the system Python with the project's numpy linked in (no network), as tests/fixtures/venvs.py
    makes one; the system Python itself has no numpy."""
    import numpy

    version = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    ).stdout.strip()
    if version != str(sys.version_info[:2]):
        pytest.skip(f"/usr/bin/python3 is {version}, the project's numpy is built for {sys.version_info[:2]}")
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    for item in Path(numpy.__file__).parent.parent.iterdir():
        if item.name.startswith("numpy"):
            (site / item.name).symlink_to(item)


def make_home_user(sshd: SshServer) -> HomeUser:
    """The user (login shell zsh), ``~/venv`` with numpy, and ``~/run``: a log and ``step_100`` whose
    ``layer.weight`` holds a NaN. Made once per sshd setup (the tests that use it only read it)."""
    return home_user(sshd, "homezsh", _nan_run)


def home_user(sshd: SshServer, tag: str, fill: Callable[[Path], None]) -> HomeUser:
    """A zsh login user known by ``tag``, ``~/venv`` with numpy, and ``~/run`` as ``fill(run)`` writes it
    (the directory does not exist yet); made once per sshd setup and tag, owned by the user."""
    key = (sshd.setup.root, tag)
    made = _MADE.get(key)
    if made is None:
        made = _MADE[key] = _make(sshd, tag, fill)
    return made


_MADE: dict[tuple[Path, str], HomeUser] = {}


def _nan_run(run: Path) -> None:
    (run / "step_100").mkdir(parents=True)
    write_safetensors(run / "step_100" / "model.safetensors", {NAN_TENSOR: [1.0, float("nan"), 2.0]})
    lines = [f"step={step} loss={2.0 - step / 200:.4f}" for step in range(1, 101)]
    (run / "train.log").write_text("\n".join(lines) + "\n")


def _make(sshd: SshServer, tag: str, fill: Callable[[Path], None]) -> HomeUser:
    if not Path(SYSTEM_PYTHON).exists():
        pytest.skip("needs /usr/bin/python3")
    assert subprocess.run([SYSTEM_PYTHON, "-c", "import numpy"], capture_output=True).returncode
    name = sshd.setup.add_user(tag, "/usr/bin/zsh")
    home = sshd.setup.root / "home" / name
    make_numpy_venv(home / "venv")
    fill(home / "run")
    shutil.chown(home, name, "users")
    for path in home.rglob("*"):
        if not path.is_symlink():
            shutil.chown(path, name, "users")
    return HomeUser(name, home, sshd.target(tag))
