"""A list that contains itself, beside a NaN tensor: the walk stops at the cycle; the NaN is found."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import NAN, Case, f32, pickle_of, tensor, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="NaN 1")


def build(folder: Path, sentinel: Path) -> Path:
    body = b"]q\x00(h\x00" + tensor("0", (1,)) + b"e"
    return torch_zip(folder / "cycle.pt", pickle_of(body), {"0": f32(NAN)})
