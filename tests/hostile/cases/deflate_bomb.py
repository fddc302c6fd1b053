"""A 3 MB data.pkl record that inflates to 3 GB of NONE opcodes (torch never compresses one): inflation stops
at trainprobe's cap; one line, no gigabytes taken."""

from __future__ import annotations

import zlib
from pathlib import Path

from hostile.craft import Case, RawRecord, raw_zip

CASE = Case(scan=2, check=2, triage=2, says="inflates to more than 32 MB")


def _deflated(data: bytes, *, last: bool = False) -> bytes:
    # A full flush ends a self-contained block: identical pieces repeat without deflating 3 GB here.
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush(zlib.Z_FINISH if last else zlib.Z_FULL_FLUSH)


def build(folder: Path, sentinel: Path) -> Path:
    piece = b"N" * (16 << 20)
    stream = _deflated(b"\x80\x02(") + _deflated(piece) * 192 + _deflated(b"l.", last=True)
    size = 3 + 192 * len(piece) + 2
    return raw_zip(
        folder / "bomb.pt",
        [
            RawRecord("archive/data.pkl", stream, size, method=zlib.DEFLATED),
            RawRecord("archive/byteorder", b"little", 6, zlib.crc32(b"little")),
        ],
    )
