"""A persistent id naming its storage by a 5,000-digit integer (printing it would raise)."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, glob, integer, named, pickle_of, text, torch_zip, tuple_of

CASE = Case(scan=1, check=1, triage=1, says="names a storage by <a 16,610-bit integer>")


def build(folder: Path, sentinel: Path) -> Path:
    pid = tuple_of(text("storage"), glob("torch", "FloatStorage"), integer(10**5000), text("cpu"), integer(1))
    return torch_zip(folder / "pid.pt", pickle_of(named(w=pid + b"Q")))
