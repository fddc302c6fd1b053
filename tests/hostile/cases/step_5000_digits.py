"""A checkpoint whose step is a 5,000-digit integer (Python 3.11 refuses to print it): every command prints
it safely, or not at all."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, f32, integer, named, pickle_of, tensor, torch_zip

CASE = Case(scan=0, check=0, triage=0)


def build(folder: Path, sentinel: Path) -> Path:
    data = pickle_of(named(w=tensor("0", (2,)), step=integer(10**5000), global_step=integer(-(10**5000))))
    return torch_zip(folder / "bigstep.pt", data, {"0": f32(1.0, 2.0)})
