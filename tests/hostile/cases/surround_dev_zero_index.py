"""An HF index that is a symlink to ``/dev/zero`` beside a NaN shard: side files are read only when regular
and with a cap, so it is refused at once (no read until MemoryError) and the NaN is still found."""

from __future__ import annotations

import os
from pathlib import Path

from hostile.craft import Case, f32, safetensors

CASE = Case(scan=1, check=1, triage=1, says="NON-FINITE", seconds=10.0)
HEADER = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'


def build(folder: Path, sentinel: Path) -> Path:
    unit = folder / "ckpt"
    unit.mkdir()
    safetensors(unit / "model-00001-of-00001.safetensors", HEADER, f32(float("nan"), 1.0))
    os.symlink("/dev/zero", unit / "model.safetensors.index.json")
    return unit
