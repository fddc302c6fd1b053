"""A legacy-format file whose storage declares -1 elements: the tensor is missing, corrupt."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, integer, list_of, named, pickle_of, tensor, text

CASE = Case(scan=1, check=1, triage=1, says="truncated")

MAGIC = 0x1950A86A20F9469CFC6C


def build(folder: Path, sentinel: Path) -> Path:
    path = folder / "legacy.pt"
    sysinfo = named(protocol_version=integer(1001), little_endian=b"\x88")
    path.write_bytes(
        pickle_of(integer(MAGIC))
        + pickle_of(integer(1001))
        + pickle_of(sysinfo)
        + pickle_of(named(w=tensor("0", (1,))))
        + pickle_of(list_of(text("0")))
        + (-1).to_bytes(8, "little", signed=True)
        + b"\x00" * 4
    )
    return path
