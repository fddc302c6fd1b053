"""One clear line on the command line when the container of a single run is not running."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.containers
TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))


def test_run_in_a_stopped_container_says_so_in_one_line(docker: Any, tmp_path: Path) -> None:
    script = tmp_path / "hello.py"
    script.write_text("print('hello')\n")
    proc = subprocess.run(
        [TRAINPROBE, "run", f"docker={docker.stopped}", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 255
    assert proc.stdout == ""
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: docker={docker.stopped}: container {docker.stopped} is not running — start it: docker start "
        f"{docker.stopped}"
    ]
    assert "log: " in proc.stderr
