"""A tuple holding an INT written as 5,000 digits of text, as a bare pickle: refused by the opcode walk (no
int() of it, no repr)."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case

CASE = Case(scan=1, check=1, triage=1, says="an integer of more than 4,300 digits")


def build(folder: Path, sentinel: Path) -> Path:
    path = folder / "int0.pkl"
    path.write_bytes(b"\x80\x02(I" + b"7" * 5000 + b"\nt.")
    return path
