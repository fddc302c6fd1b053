"""A protocol-4 FRAME claiming 2^40 bytes, in a bare pickle."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case

CASE = Case(scan=1, check=1, triage=1, says="declares 1,099,511,627,776 bytes")


def build(folder: Path, sentinel: Path) -> Path:
    path = folder / "frame.pkl"
    path.write_bytes(b"\x80\x04\x95" + (1 << 40).to_bytes(8, "little") + b"N.")
    return path
