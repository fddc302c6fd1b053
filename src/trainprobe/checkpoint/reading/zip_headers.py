"""The bytes around each record of a zip archive, held against its central directory: what a CRC32 of the
record's data cannot see. A stray write (a bad sector, 64 bytes of another job's output) that lands in a
record's local header, in torch's alignment padding or in the data descriptor after the record leaves every
tensor readable and every CRC32 right, yet the file is no longer the one its writer wrote: the damage is
real, only not where the tensors are.

torch writes every record as a local header (its name, flags and method as the directory has them; sizes and
CRC32 zero, with the "data descriptor follows" flag), an extra field ``FB`` of ``Z`` bytes that pads the data
to 64 bytes, the data, then a data descriptor with the record's CRC32 and sizes. Other writers' archives
(Python's ``zipfile``, without padding or descriptors) are checked for what they have. Reads headers only: a
few dozen bytes per record. Stdlib only.
"""

from __future__ import annotations

import struct
from typing import Any

from trainprobe.checkpoint.reading.zipdir import Entry

_LOCAL = struct.Struct("<4s5H3L2H")  # signature, version, flags, method, time, date, crc, sizes, lengths
_LOCAL_SIGNATURE = b"PK\x03\x04"
_DESCRIPTOR_SIGNATURE = b"PK\x07\x08"
_HAS_DESCRIPTOR = 0x08
_UTF8_NAME = 0x800
_TORCH_PADDING = 0x4246  # the extra field id b"FB", little-endian
_ZIP64_SIZE = 0xFFFFFFFF


def header_problem(buffer: Any, base: int, total: int, info: Entry) -> str | None:
    """What is wrong with the bytes around one record of the archive at ``buffer[base:base+total]`` (its
    local header, torch's padding, its data descriptor), or None when they say what the directory says."""
    start = base + info.header_offset
    with memoryview(buffer) as view:
        fixed = bytes(view[start : start + _LOCAL.size])
        if len(fixed) < _LOCAL.size or fixed[:4] != _LOCAL_SIGNATURE:
            return None  # no local header at all: reading the record says so (record_data_offset)
        _sig, _ver, flags, method, _t, _d, crc, packed, size, name_len, extra_len = _LOCAL.unpack(fixed)
        name = bytes(view[start + _LOCAL.size : start + _LOCAL.size + name_len])
        at = start + _LOCAL.size + name_len
        extra = bytes(view[at : at + extra_len])
        data_end = at + extra_len + info.compress_size
        descriptor = bytes(view[data_end : data_end + 24]) if data_end <= base + total else b""
    where = f"record {info.filename}'s local header"
    if name != _stored_name(info, flags):
        return f"{where} names it {_shown(name)}, the directory {info.orig_filename!r}"
    if method != info.compress_type:
        return f"{where} says compression method {method}, the directory {info.compress_type}"
    if not flags & _HAS_DESCRIPTOR and _ZIP64_SIZE not in (packed, size) and (crc, packed, size) != (
        info.CRC, info.compress_size, info.file_size,
    ):  # fmt: skip
        return f"{where} records CRC32 {crc:08x} and {packed:,} bytes, the directory {info.CRC:08x}"
    padding = _padding_problem(extra)
    if padding is not None:
        return f"{where} {padding}"
    if flags & _HAS_DESCRIPTOR and descriptor and not _descriptor_agrees(descriptor, info):
        return (
            f"record {info.filename}'s data descriptor (after its data) does not record the directory's "
            f"CRC32 {info.CRC:08x} and {info.compress_size:,} bytes"
        )
    return None


def _stored_name(info: Entry, flags: int) -> bytes:
    try:
        return info.orig_filename.encode("utf-8" if flags & _UTF8_NAME else "cp437")
    except UnicodeEncodeError:
        return info.orig_filename.encode("utf-8", "surrogateescape")


def _shown(raw: bytes) -> str:
    return repr(raw.decode("utf-8", "backslashreplace"))


def _padding_problem(extra: bytes) -> str | None:
    """torch's alignment padding (extra field ``FB``) holds ``Z`` bytes only; other fields are not judged."""
    while len(extra) >= 4:
        kind, size = struct.unpack("<HH", extra[:4])
        body = extra[4 : 4 + size]
        if kind == _TORCH_PADDING and body.strip(b"Z"):
            bad = next(i for i, b in enumerate(body) if b != ord("Z"))
            other = len(body) - body.count(b"Z")
            return f"has {other} byte(s) in torch's padding that are not its 'Z' (from byte {bad})"
        extra = extra[4 + size :]
    return None


def _descriptor_agrees(descriptor: bytes, info: Entry) -> bool:
    """Whether the descriptor after a record (signature optional; sizes of 4 or 8 bytes) records the
    directory's CRC32 and sizes."""
    body = descriptor[4:] if descriptor[:4] == _DESCRIPTOR_SIGNATURE else descriptor
    want = (info.CRC, info.compress_size, info.file_size)
    short = struct.unpack("<3L", body[:12]) if len(body) >= 12 else None
    wide = struct.unpack("<LQQ", body[:20]) if len(body) >= 20 else None
    return want in (short, wide)


__all__ = ["header_problem"]
