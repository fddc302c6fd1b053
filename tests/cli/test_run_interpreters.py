"""Stage 1 counts an interpreter once however it is named, but keeps a venv's python apart."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from trainprobe.remote import _stage1


def test_symlinked_names_are_one_interpreter_and_a_venv_is_another(tmp_path: Path) -> None:
    real = os.path.realpath(sys.executable)
    alias = tmp_path / "bin" / "python3"
    alias.parent.mkdir()
    alias.symlink_to(real)
    assert _stage1.identity(str(alias)) == _stage1.identity(real)
    venv = tmp_path / "venv"
    subprocess.run([real, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert os.path.realpath(venv / "bin" / "python") == real  # links to the same file...
    assert _stage1.identity(str(venv / "bin" / "python")) != _stage1.identity(real)  # ...but sees the venv
