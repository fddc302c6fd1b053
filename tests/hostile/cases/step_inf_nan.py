"""Non-finite counters: an inf step, a NaN epoch; ``--json`` stays valid JSON."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import NAN, Case, f32, floating, named, pickle_of, tensor, torch_zip

CASE = Case(scan=0, check=0, triage=0)


def build(folder: Path, sentinel: Path) -> Path:
    data = pickle_of(named(w=tensor("0", (2,)), step=floating(float("inf")), epoch=floating(NAN)))
    return torch_zip(folder / "infstep.pt", data, {"0": f32(1.0, 2.0)})
