"""A NaN checkpoint at the bottom of a directory 1,100 levels deep: the walk uses an explicit stack, so no
RecursionError; the NaN is found by every command."""

from __future__ import annotations

import os
from pathlib import Path

from hostile.craft import Case, f32, safetensors

CASE = Case(scan=1, check=1, triage=1, says="NON-FINITE", seconds=10.0)
HEADER = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'


def build(folder: Path, sentinel: Path) -> Path:
    top = folder / "deep"
    top.mkdir()
    deepest = str(top)
    for _ in range(1100):  # one level at a time: pathlib's and os.makedirs's mkdir recurse
        deepest = os.path.join(deepest, "d")
        os.mkdir(deepest)
    safetensors(Path(deepest) / "model.safetensors", HEADER, f32(float("nan"), 1.0))
    return top
