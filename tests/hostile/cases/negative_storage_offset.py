"""A tensor whose storage offset is negative (it would read bytes before its storage)."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, f32, named, pickle_of, tensor, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="negative storage offset")


def build(folder: Path, sentinel: Path) -> Path:
    data = pickle_of(named(w=tensor("0", (1,), offset=-4)))
    return torch_zip(folder / "offset.pt", data, {"0": f32(1.0, 2.0)})
