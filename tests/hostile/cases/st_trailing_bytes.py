"""A safetensors header with bytes after the last tensor (a polyglot file): the safetensors library refuses
it; corrupt, named, never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="after the last tensor")
HEADER = b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_trailing_bytes.safetensors", HEADER, bytes(8))
