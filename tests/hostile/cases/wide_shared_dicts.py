"""Eight levels of a dict holding the level below 100 times (10^16 paths): the skeleton the optimizer and
step finders walk is a tree; each container appears once."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, f32, integer, named, pickle_of, tensor, text, torch_zip

CASE = Case(scan=0, check=0, triage=0)


def build(folder: Path, sentinel: Path) -> Path:
    body = named(state=named(step=integer(1)), w=tensor("0", (1,))) + b"q\x000"
    for level in range(1, 9):
        body += b"}(" + b"".join(text(f"k{i}") + b"h" + bytes([level - 1]) for i in range(100)) + b"u"
        body += b"q" + bytes([level]) + b"0"
    body += b"h\x08"
    return torch_zip(folder / "wide.pt", pickle_of(named(root=body)), {"0": f32(1.0)})
