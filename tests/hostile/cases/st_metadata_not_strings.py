"""A safetensors header with metadata values that are not strings: the safetensors library refuses it;
corrupt, named, never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="__metadata__ is not a map of strings")
HEADER = b'{"__metadata__": {"step": 5}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_metadata_not_strings.safetensors", HEADER, bytes(4))
