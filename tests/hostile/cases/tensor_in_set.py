"""A NaN tensor inside a set (torch.load returns it): found, named by its place in the set."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import NAN, Case, f32, named, pickle_of, set_of, tensor, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="seen.<item 0>")


def build(folder: Path, sentinel: Path) -> Path:
    data = pickle_of(named(seen=set_of(tensor("0", (2,)))))
    return torch_zip(folder / "set.pt", data, {"0": f32(1.0, NAN)})
