"""A BUILD opcode that tries to rewrite a tensor's shape after it was rebuilt: kept aside, the view
unchanged (its NaN found at the right index)."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import NAN, Case, f32, integer, named, pickle_of, tensor, torch_zip, tuple_of

CASE = Case(scan=1, check=1, triage=1, says="first bad at [1]")


def build(folder: Path, sentinel: Path) -> Path:
    rebuilt = tensor("0", (2,)) + named(shape=tuple_of(integer(10**9))) + b"b"
    return torch_zip(folder / "build.pt", pickle_of(named(w=rebuilt)), {"0": f32(1.0, NAN)})
