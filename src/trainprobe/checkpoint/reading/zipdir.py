"""A zip archive's central directory read without ``zipfile`` when it is plain (as torch writes it): no
archive comment, nothing before the archive, no zip64 sizes in its entries (torch's zip64 end records are
read, as ``zipfile`` reads them), every entry well formed. ``zipfile``'s import
(pathlib, shutil, bz2, lzma) is a few milliseconds of every torch file's scan, as much as the NaN pass over
100 MB; anything not plain is left to ``zipfile`` (:func:`central_directory` answers None), so every
damaged or unusual archive is read, and reported, exactly as before. The entries read here hold what
``zipfile.ZipInfo`` would for the fields the readers use (:class:`Entry`). Stdlib only."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, Protocol

ZIP_STORED = 0
ZIP_DEFLATED = 8

_EOCD = struct.Struct("<4s4H2LH")  # zipfile's structEndArchive
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # zipfile's structCentralDir
_LOCATOR = struct.Struct("<4sLQL")  # zipfile's structEndArchive64Locator
_EOCD64 = struct.Struct("<4sQ2H2L4Q")  # zipfile's structEndArchive64
_MAX_EXTRACT_VERSION = 63  # zipfile raises NotImplementedError above it


class Entry(Protocol):
    """What the readers use of one record of a zip archive's directory (a ``zipfile.ZipInfo`` has it)."""

    @property
    def orig_filename(self) -> str: ...
    @property
    def filename(self) -> str: ...
    @property
    def header_offset(self) -> int: ...
    @property
    def compress_type(self) -> int: ...
    @property
    def compress_size(self) -> int: ...
    @property
    def file_size(self) -> int: ...
    @property
    def CRC(self) -> int: ...  # zipfile's name
    @property
    def flag_bits(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Record:
    orig_filename: str
    filename: str
    header_offset: int
    compress_type: int
    compress_size: int
    file_size: int
    CRC: int  # zipfile's name
    flag_bits: int


def _name(raw: bytes, flags: int) -> tuple[str, str]:
    """(the stored name, the name zipfile gives it: cut at a NUL, os.sep made '/'), as ``ZipInfo`` does."""
    orig = raw.decode("utf-8") if flags & 0x800 else raw.decode("cp437")
    cut = orig.split("\x00", 1)[0]
    if os.sep != "/" and os.sep in cut:
        cut = cut.replace(os.sep, "/")
    return orig, cut


def _plain_extra(extra: bytes) -> bool:
    """Whether an entry's extra field is well formed and holds no zip64 sizes (zipfile would rewrite them)."""
    while len(extra) >= 4:
        kind, size = struct.unpack("<HH", extra[:4])
        if size + 4 > len(extra) or kind == 0x0001:
            return False
        extra = extra[size + 4 :]
    return True


def central_directory(buffer: Any, base: int, total: int) -> list[Record] | None:
    """The entries of the zip archive at ``buffer[base:base+total]``, in directory order, when it is plain;
    None when ``zipfile`` must read it (a comment, zip64, data before the archive, any damage)."""
    if total < _EOCD.size:
        return None
    with memoryview(buffer)[base + total - _EOCD.size : base + total] as view:
        sig, _disk, _cd_disk, _here, _count, size_cd, offset_cd, comment = _EOCD.unpack(view)
    if sig != b"PK\x05\x06" or comment != 0:
        return None
    zip64 = _zip64(buffer, base, total)
    if zip64 is None:
        return None
    ends = total - _EOCD.size
    if zip64 != _NO_ZIP64:
        size_cd, offset_cd = zip64
        ends -= _LOCATOR.size + _EOCD64.size
    if offset_cd + size_cd != ends:
        return None  # bytes before the archive (zipfile shifts every offset), or a directory that lies
    with memoryview(buffer)[base + offset_cd : base + offset_cd + size_cd] as view:
        directory = bytes(view)
    try:
        return _entries(directory)
    except (struct.error, UnicodeDecodeError, ValueError):
        return None


_NO_ZIP64 = (-1, -1)


def _zip64(buffer: Any, base: int, total: int) -> tuple[int, int] | None:
    """The directory's (size, offset) from a zip64 end record before the end record, as zipfile takes them
    (torch always writes one); :data:`_NO_ZIP64` when there is none; None when zipfile must judge it."""
    at = total - _EOCD.size - _LOCATOR.size
    if at < 0:
        return _NO_ZIP64
    with memoryview(buffer)[base + at : base + at + _LOCATOR.size] as view:
        sig, disk, _offset, disks = _LOCATOR.unpack(view)
    if sig != b"PK\x06\x07":
        return _NO_ZIP64
    at -= _EOCD64.size
    if disk != 0 or disks > 1 or at < 0:
        return None  # zipfile refuses (several disks) or fails to seek
    with memoryview(buffer)[base + at : base + at + _EOCD64.size] as view:
        fields = _EOCD64.unpack(view)
    if fields[0] != b"PK\x06\x06":
        return None  # zipfile would then take the end record's values with a locator between: left to it
    return int(fields[8]), int(fields[9])


def _entries(directory: bytes) -> list[Record] | None:
    out: list[Record] = []
    pos, end = 0, len(directory)
    while pos < end:
        fields = _CENTRAL.unpack_from(directory, pos)  # struct.error when cut short
        if fields[0] != b"PK\x01\x02" or fields[3] > _MAX_EXTRACT_VERSION:
            return None
        flags, method, crc, csize, usize = fields[5], fields[6], fields[9], fields[10], fields[11]
        name_len, extra_len, comment_len, offset = fields[12], fields[13], fields[14], fields[18]
        at = pos + _CENTRAL.size
        if at + name_len + extra_len + comment_len > end:
            return None
        orig, name = _name(directory[at : at + name_len], flags)
        if not _plain_extra(directory[at + name_len : at + name_len + extra_len]):
            return None
        out.append(Record(orig, name, offset, method, csize, usize, crc, flags))
        pos = at + name_len + extra_len + comment_len
    return out
