"""A safetensors header with two tensors sharing bytes: the safetensors library refuses it; corrupt, named,
never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="overlap in the data")
HEADER = (
    b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F3'
    b'2", "shape": [2], "data_offsets": [4, 12]}}'
)


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_overlapping_ranges.safetensors", HEADER, bytes(12))
