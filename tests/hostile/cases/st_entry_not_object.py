"""A safetensors header with an entry that is a number: the safetensors library refuses it; corrupt, named,
never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="malformed header entry")
HEADER = b'{"a": 5}'


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_entry_not_object.safetensors", HEADER, bytes(0))
