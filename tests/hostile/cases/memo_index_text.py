"""The same memo attack in protocol 0's text spelling (``p268435456``), as a bare pickle."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case

CASE = Case(scan=1, check=1, triage=1, says="memo index 268,435,456")


def build(folder: Path, sentinel: Path) -> Path:
    path = folder / "memo0.pkl"
    path.write_bytes(b"N" + b"p268435456\n.")
    return path
