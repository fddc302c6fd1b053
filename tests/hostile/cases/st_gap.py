"""A safetensors header with bytes between tensors that belong to none: the safetensors library refuses it;
corrupt, named, never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="belong to no tensor")
HEADER = (
    b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "b": {"dtype": "F3'
    b'2", "shape": [1], "data_offsets": [8, 12]}}'
)


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_gap.safetensors", HEADER, bytes(12))
