"""A safetensors header with an infinite dimension: the safetensors library refuses it; corrupt, named,
never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="Infinity is not a JSON number")
HEADER = b'{"w": {"dtype": "F32", "shape": [Infinity], "data_offsets": [0, 4]}}'


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_infinite_dim.safetensors", HEADER, bytes(4))
