"""A tensor whose size is a tuple of strings and whose stride is a float."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import (
    Case,
    call,
    f32,
    floating,
    glob,
    integer,
    named,
    pickle_of,
    text,
    torch_zip,
    tuple_of,
)

CASE = Case(scan=1, check=1, triage=1, says="not an integer")


def build(folder: Path, sentinel: Path) -> Path:
    storage = (
        tuple_of(text("storage"), glob("torch", "FloatStorage"), text("0"), text("cpu"), integer(1)) + b"Q"
    )
    rebuilt = call(
        glob("torch._utils", "_rebuild_tensor_v2"),
        storage,
        integer(0),
        tuple_of(text("1")),
        tuple_of(floating(1.0)),
        b"\x89",
        call(glob("collections", "OrderedDict"), b")"),
    )
    return torch_zip(folder / "geometry.pt", pickle_of(named(w=rebuilt)), {"0": f32(1.0)})
