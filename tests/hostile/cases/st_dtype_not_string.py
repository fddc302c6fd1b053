"""A safetensors header with a dtype that is a number: the safetensors library refuses it; corrupt, named,
never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="malformed header entry")
HEADER = b'{"w": {"dtype": 5, "shape": [1], "data_offsets": [0, 4]}}'


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_dtype_not_string.safetensors", HEADER, bytes(4))
