"""A safetensors header with a NaN byte offset: the safetensors library refuses it; corrupt, named, never a
traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="NaN is not a JSON number")
HEADER = b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, NaN]}}'


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_nan_offset.safetensors", HEADER, bytes(4))
