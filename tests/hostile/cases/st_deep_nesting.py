"""A safetensors header with 100,000 nested arrays: the safetensors library refuses it; corrupt, named,
never a traceback."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, safetensors

CASE = Case(scan=1, check=1, triage=1, says="nested too deeply")
HEADER = b'{"__metadata__": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def build(folder: Path, sentinel: Path) -> Path:
    return safetensors(folder / "st_deep_nesting.safetensors", HEADER, bytes(0))
