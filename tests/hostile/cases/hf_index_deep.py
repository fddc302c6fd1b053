"""A sharded index nested 100,000 levels deep: not valid, one line (``triage`` of its folder finds no
checkpoint there: exit 2)."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case

CASE = Case(scan=1, check=1, triage=2, says="not a valid index")


def build(folder: Path, sentinel: Path) -> Path:
    path = folder / "model.safetensors.index.json"
    path.write_bytes(b'{"weight_map": {}, "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    return path
