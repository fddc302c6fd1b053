"""A safetensors header with a fractional dimension: the safetensors library refuses it; corrupt, named,
never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="malformed header entry")
HEADER = b'{"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}}'


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_float_dim.safetensors", HEADER, bytes(4))
