"""Zip archives inside a mapped buffer: a file view for ``zipfile``, record locations and CRC32 verification.

torch writes zip archives uncompressed with a CRC32 per record but never checks them on load;
``verify_zip_crc`` does, reading the mapped bytes in chunks."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from typing import Any

_CHUNK = 16 << 20


class BufferWindow(io.RawIOBase):
    """A read-only, seekable file over ``buffer[base:base+length]`` without copying it (zipfile reads
    through it)."""

    def __init__(self, buffer: Any, base: int = 0, length: int | None = None) -> None:
        super().__init__()
        self._view = memoryview(buffer)
        self._base = base
        self._length = len(self._view) - base if length is None else length
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            self._pos = offset
        elif whence == io.SEEK_CUR:
            self._pos += offset
        else:
            self._pos = self._length + offset
        if self._pos < 0:
            raise OSError("seek before start of window")
        return self._pos

    def readinto(self, b: Any) -> int:
        start = min(self._pos, self._length)
        n: int = min(len(b), self._length - start)
        b[:n] = self._view[self._base + start : self._base + start + n]
        self._pos = start + n
        return n

    def close(self) -> None:
        self._view.release()
        super().close()


def record_data_offset(buffer: Any, base: int, info: zipfile.ZipInfo) -> int:
    """The offset (relative to ``base``) where a stored record's bytes start: after its local header."""
    header = bytes(memoryview(buffer)[base + info.header_offset : base + info.header_offset + 30])
    if len(header) < 30 or header[:4] != b"PK\x03\x04":
        raise ValueError(f"record {info.filename} has no local header at offset {info.header_offset}")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return int(info.header_offset) + 30 + int(name_len) + int(extra_len)


def verify_zip_crc(buffer: Any, base: int = 0, length: int | None = None) -> list[str]:
    """CRC32 and size of every record of the zip archive in ``buffer[base:base+length]``; one line per
    problem."""
    problems: list[str] = []
    view = memoryview(buffer)
    length = len(view) - base if length is None else length
    try:
        with zipfile.ZipFile(BufferWindow(buffer, base, length)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return [f"not a readable zip archive: {exc}"]
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            continue  # torch never compresses; zipfile itself checks compressed records when they are read
        try:
            start = record_data_offset(buffer, base, info)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        end = start + info.file_size
        if end > length:
            problems.append(
                f"record {info.filename} is truncated: needs {info.file_size} bytes, file ends sooner"
            )
            continue
        crc = 0
        for pos in range(start, end, _CHUNK):
            crc = zlib.crc32(view[base + pos : base + min(end, pos + _CHUNK)], crc)
        if crc != info.CRC:
            problems.append(
                f"record {info.filename} fails its CRC32 check (stored {info.CRC:08x}, computed {crc:08x})"
            )
    view.release()
    return problems
