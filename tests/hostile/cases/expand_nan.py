"""A 1.5 kB tensor of 10^15 elements (stride 0 on every axis, as ``expand`` makes) holding a NaN: scanned
at once, the NaN counted per element, as ``torch.isnan(t).sum()`` counts it. ``diff`` refuses to walk it
element by element (one error line)."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import NAN, Case, f32, named, pickle_of, tensor, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="NaN 1000000000000000")


def build(folder: Path, sentinel: Path) -> Path:
    w = tensor("0", (100_000, 100_000, 100_000), (0, 0, 0), numel=1)
    return torch_zip(folder / "expand.pt", pickle_of(named(w=w)), {"0": f32(NAN)})
