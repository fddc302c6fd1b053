"""Optimizer state whose step counters are NaN, infinite and 5,000 digits long (found by the fuzzer: a NaN
step made ``check`` raise ValueError): none is taken for a step; the NaN is reported as a NaN."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import (
    NAN,
    Case,
    dict_of,
    f32,
    floating,
    integer,
    list_of,
    named,
    pickle_of,
    tensor,
    torch_zip,
)

CASE = Case(scan=1, check=1, triage=1, says="NaN 1")


def _entry(step: bytes, key: str) -> bytes:
    return named(step=step, exp_avg=tensor(key, (2,)), exp_avg_sq=tensor(key, (2,)))


def build(folder: Path, sentinel: Path) -> Path:
    state = dict_of(
        [
            (integer(0), _entry(tensor("s", (), numel=1), "0")),
            (integer(1), _entry(floating(float("inf")), "0")),
            (integer(2), _entry(integer(10**5000), "0")),
        ]
    )
    groups = list_of(named(lr=floating(0.1), params=list_of(integer(0), integer(1), integer(2))))
    data = pickle_of(
        named(
            model=named(
                **{
                    "a.weight": tensor("0", (2,)),
                    "b.weight": tensor("0", (2,)),
                    "c.weight": tensor("0", (2,)),
                }
            ),
            optimizer=named(state=state, param_groups=groups),
        )
    )
    return torch_zip(folder / "counters.pt", data, {"0": f32(1.0, 2.0), "s": f32(NAN)})
