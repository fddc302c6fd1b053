"""A safetensors header with a dimension of 10^30 (an empty tensor): the safetensors library refuses it;
corrupt, named, never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="malformed header entry")
HEADER = b'{"w": {"dtype": "F32", "shape": [1000000000000000000000000000000, 0], "data_offsets": [0, 0]}}'


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_huge_dim.safetensors", HEADER, bytes(0))
