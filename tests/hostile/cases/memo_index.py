"""A 9-byte data.pkl whose LONG_BINPUT asks for memo slot 2^28 (Python's unpickler would zero 4 GB for
it): refused by the opcode walk before anything is allocated."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="memo index 268,435,456 at byte 3")


def build(folder: Path, sentinel: Path) -> Path:
    return torch_zip(folder / "memo.pt", b"\x80\x02N" + b"r" + (1 << 28).to_bytes(4, "little") + b".")
