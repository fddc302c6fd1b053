"""A LONG4 integer of 100 kB in data.pkl (printing one takes quadratic time on Python 3.10, and 3.11
refuses): refused by the opcode walk."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="an integer of 100,000 bytes")


def build(folder: Path, sentinel: Path) -> Path:
    long4 = b"\x8b" + (100_000).to_bytes(4, "little") + b"\x01" * 100_000
    return torch_zip(folder / "long4.pt", b"\x80\x02" + long4 + b".")
