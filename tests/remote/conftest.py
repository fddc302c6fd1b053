"""Remote-engine tests keep their run logs in the test's temporary directory, and know which processes were
there before them (tests/remote/faults.py: what a test leaves running)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .faults import remember_processes


@pytest.fixture(autouse=True)
def _runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPROBE_RUNS_DIR", str(tmp_path / "runs"))


@pytest.fixture(autouse=True)
def _processes_before_the_test() -> None:
    remember_processes()
