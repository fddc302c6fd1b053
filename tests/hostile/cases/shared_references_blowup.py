"""60 levels of a list holding the level below twice (2^60 paths to one NaN tensor, in 700 bytes): each
container is walked once; every command ends at once."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import NAN, Case, f32, named, pickle_of, tensor, torch_zip

CASE = Case(scan=1, check=1, triage=1, says="NaN 1")


def build(folder: Path, sentinel: Path) -> Path:
    body = tensor("0", (1,)) + b"q\x000"  # memo 0: the tensor (then popped: each level is fetched by GET)
    for level in range(1, 61):
        body += b"(h" + bytes([level - 1]) + b"h" + bytes([level - 1]) + b"lq" + bytes([level]) + b"0"
    body += b"h" + bytes([60])
    return torch_zip(folder / "dag.pt", pickle_of(named(x=body)), {"0": f32(NAN)})
