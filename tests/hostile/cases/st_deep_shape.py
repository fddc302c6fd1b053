"""A safetensors header with a shape nested 100,000 deep: the safetensors library refuses it; corrupt,
named, never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="nested too deeply")
HEADER = b'{"w": {"dtype": "F32", "shape": ' + b"[" * 100_000 + b"]" * 100_000 + b', "data_offsets": [0, 4]}}'


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_deep_shape.safetensors", HEADER, bytes(4))
