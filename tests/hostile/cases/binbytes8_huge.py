"""BINBYTES8 declaring a terabyte in a 15-byte pickle: refused before the unpickler allocates it."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="declares 1,099,511,627,776 bytes but only 4 are left")


def build(folder: Path, sentinel: Path) -> Path:
    return torch_zip(folder / "bytes8.pt", b"\x80\x04\x8e" + (1 << 40).to_bytes(8, "little") + b"abc.")
