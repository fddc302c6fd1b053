"""A safetensors header with negative dimensions: the safetensors library refuses it; corrupt, named, never
a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="malformed header entry")
HEADER = b'{"w": {"dtype": "F32", "shape": [-1, -4], "data_offsets": [0, 16]}}'


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_negative_dims.safetensors", HEADER, bytes(16))
