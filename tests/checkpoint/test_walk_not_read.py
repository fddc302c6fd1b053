"""The walk says what it could not open (docs/names.md): an unreadable folder is a 'not read' unit
(unreadable), in discovery and in triage; root reads mode 000, so the refusal is injected here (the CLI as
``nobody`` is in tests/hostile/test_surroundings.py)."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import pytest

from trainprobe.checkpoint import safe_io
from trainprobe.checkpoint.units.discover import NOT_READ, discover_units
from trainprobe.conventions import CHECKPOINT_SUFFIXES
from trainprobe.triage.collect import find_run_units


def _nan_file(path: Path) -> None:
    header = b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'
    path.write_bytes(struct.pack("<Q", len(header)) + header + struct.pack("<f", float("nan")))


@pytest.fixture
def refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = tmp_path / "run"
    (run / "secret").mkdir(parents=True)
    _nan_file(run / "ok.safetensors")
    _nan_file(run / "secret" / "bad.safetensors")
    real = os.scandir

    def scandir(path: Any) -> Any:
        if os.path.basename(os.fspath(path)) == "secret":
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    return run


def test_unreadable_folder_is_a_not_read_unit(refused: Path) -> None:
    units = discover_units([str(refused)])
    problems = {os.path.basename(u.path): u.problem for u in units}
    assert problems["secret"] == f"{NOT_READ}: Permission denied"
    assert problems["ok.safetensors"] is None


def test_triage_lists_what_it_could_not_read(refused: Path) -> None:
    _logs, units, not_read = find_run_units(str(refused))
    assert [os.path.basename(u.path) for u in units] == ["ok.safetensors"]
    assert [(os.path.basename(p), why) for p, why in not_read] == [("secret", "Permission denied")]


def test_walk_is_an_explicit_stack(tmp_path: Path, deep_tree: Path) -> None:
    not_read: list[tuple[str, str]] = []
    assert sum(1 for _ in safe_io.walk(str(tmp_path), not_read)) == 1101
    assert not_read == []


def test_side_file_refuses_fifo_and_devices(tmp_path: Path) -> None:
    fifo = tmp_path / "trainer_state.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        safe_io.read_side(str(fifo))
    with pytest.raises(OSError, match="not a regular file"):
        safe_io.read_side("/dev/zero")
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 100)
    with pytest.raises(OSError, match="larger than"):
        safe_io.read_side(str(big), cap=10)


@pytest.mark.parametrize("suffix", CHECKPOINT_SUFFIXES)
def test_a_checkpoint_name_no_reader_claims_is_not_read(tmp_path: Path, suffix: str) -> None:
    """A file named as checkpoints are (``weights.hdf5`` as ``weights.h5``) that no reader claims is a unit
    that was not read — one rule, conventions.CHECKPOINT_SUFFIXES — never silently left out."""
    (tmp_path / f"weights{suffix}").write_bytes(b"no reader knows these bytes" * 4)
    (tmp_path / "notes.txt").write_text("not a checkpoint\n")
    units = discover_units([str(tmp_path)])
    assert [(os.path.basename(u.path), u.unread) for u in units] == [
        (f"weights{suffix}", [str(tmp_path / f"weights{suffix}")])
    ]
