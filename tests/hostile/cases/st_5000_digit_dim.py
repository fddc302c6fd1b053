"""A safetensors header with a dimension of 5,000 digits: the safetensors library refuses it; corrupt,
named, never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="not valid JSON")
HEADER = b'{"w": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 4]}}'


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_5000_digit_dim.safetensors", HEADER, bytes(4))
