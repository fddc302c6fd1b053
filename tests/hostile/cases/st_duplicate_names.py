"""A safetensors header with one name twice (readers that keep the first and the last see different
tensors): the safetensors library refuses it; corrupt, named, never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="names 'w' twice")
HEADER = (
    b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "w": {"dtype": "F3'
    b'2", "shape": [1], "data_offsets": [4, 8]}}'
)


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_duplicate_names.safetensors", HEADER, bytes(8))
