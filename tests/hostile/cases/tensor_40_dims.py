"""A tensor of 40 dimensions (numpy 1 reads 32): corrupt, named, no numpy error."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, f32, named, pickle_of, tensor, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="40 dimensions")


def build(folder: Path, sentinel: Path) -> Path:
    return torch_zip(folder / "dims.pt", pickle_of(named(w=tensor("0", (1,) * 40))), {"0": f32(1.0)})
