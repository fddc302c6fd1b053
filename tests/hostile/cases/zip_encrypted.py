"""A torch zip whose records carry the encryption flag (torch cannot read them): corrupt, named."""

from __future__ import annotations

import zlib
from pathlib import Path

from hostile.craft import Case, RawRecord, named, pickle_of, raw_zip, text

CASE = Case(scan=1, check=1, triage=1, says="is encrypted, which torch cannot read")


def build(folder: Path, sentinel: Path) -> Path:
    data = pickle_of(named(x=text("y")))
    return raw_zip(
        folder / "encrypted.pt", [RawRecord("archive/data.pkl", data, len(data), zlib.crc32(data), flags=1)]
    )
