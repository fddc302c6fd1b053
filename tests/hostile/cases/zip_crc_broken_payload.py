"""A data.pkl whose CRC32 is wrong, holding a payload: torch reads it without checking the CRC (and would
run the payload), so it is read and the global named, not dismissed as damaged."""

from __future__ import annotations

from pathlib import Path

from hostile.craft import Case, RawRecord, named, pickle_of, raw_zip, touch

CASE = Case(scan=1, check=1, triage=1, says="SUSPICIOUS", globals=("posix.system",))


def build(folder: Path, sentinel: Path) -> Path:
    data = pickle_of(named(x=touch(sentinel)))
    return raw_zip(folder / "crc.pt", [RawRecord("archive/data.pkl", data, len(data), crc=0xDEADBEEF)])
