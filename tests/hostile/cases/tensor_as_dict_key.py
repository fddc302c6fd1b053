"""A NaN tensor used as a dict key: found, named ``cache.<key 0>``."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import NAN, Case, dict_of, f32, integer, named, pickle_of, tensor, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="cache.<key 0>")


def build(folder: Path, sentinel: Path) -> Path:
    data = pickle_of(named(cache=dict_of([(tensor("0", (2,)), integer(1))])))
    return torch_zip(folder / "key.pt", data, {"0": f32(NAN, 1.0)})
