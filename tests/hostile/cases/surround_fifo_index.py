"""A NaN checkpoint folder whose ``model.safetensors.index.json`` and ``trainer_state.json`` are FIFOs: side
files are opened non-blocking and only when regular, so nothing blocks and the NaN is still found."""

from __future__ import annotations

import os
from pathlib import Path

from hostile.craft import Case, f32, safetensors

CASE = Case(scan=1, check=1, triage=1, says="NON-FINITE", seconds=10.0)
HEADER = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'


def build(folder: Path, sentinel: Path) -> Path:
    unit = folder / "checkpoint-5"
    unit.mkdir()
    safetensors(unit / "model.safetensors", HEADER, f32(float("nan"), 1.0))
    os.mkfifo(unit / "model.safetensors.index.json")
    os.mkfifo(unit / "trainer_state.json")
    return unit
