"""A NaN tensor 300 dicts deep (deeper than the old walker's 200-level cap): found, by an explicit stack."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import NAN, Case, f32, named, pickle_of, tensor, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="NaN 1")


def build(folder: Path, sentinel: Path) -> Path:
    value = tensor("0", (1,))
    for _ in range(300):
        value = named(d=value)
    return torch_zip(folder / "deep.pt", pickle_of(value), {"0": f32(NAN)})
