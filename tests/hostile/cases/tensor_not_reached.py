"""A tensor the pickle builds and then pops off its stack: torch.load would drop it, but its NaN bytes are
in the file; it is checked as ``<not reached>.1``, with a note."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import NAN, Case, f32, named, pickle_of, tensor, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="not reachable from its object")


def build(folder: Path, sentinel: Path) -> Path:
    data = pickle_of(tensor("1", (1,)) + b"0" + named(w=tensor("0", (1,))))
    return torch_zip(folder / "popped.pt", data, {"0": f32(1.0), "1": f32(NAN)})
