"""A folder holding a NaN checkpoint, a symlink loop (``l1 -> l2 -> l1``) and a dangling link named like a
checkpoint: the walk reports the links as not read (unreadable) and still finds the NaN; diff of the folder
stops at the unit it cannot read (exit 2); no traceback."""

from __future__ import annotations

import os
from pathlib import Path

from hostile.craft import Case, f32, safetensors

CASE = Case(scan=1, check=1, triage=1, diff=2, says="not read", seconds=10.0)
HEADER = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'


def build(folder: Path, sentinel: Path) -> Path:
    unit = folder / "saves"
    unit.mkdir()
    safetensors(unit / "model.safetensors", HEADER, f32(float("nan"), 1.0))
    os.symlink("l2", unit / "l1")
    os.symlink("l1", unit / "l2")
    os.symlink("nowhere.pt", unit / "dangling.pt")
    return unit
