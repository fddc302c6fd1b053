"""A view of 10^8 elements over 20,000 stored ones (strides that overlap, as ``as_strided`` makes): not
walked element by element; the tensor is reported as not checkable."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, f32, named, pickle_of, tensor, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="views 100,000,000 elements of a storage that holds 20,000")


def build(folder: Path, sentinel: Path) -> Path:
    w = tensor("0", (10_000, 10_000), (1, 1), numel=20_000)
    return torch_zip(folder / "overlap.pt", pickle_of(named(w=w)), {"0": f32(*([1.0] * 20_000))})
