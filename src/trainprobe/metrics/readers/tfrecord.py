"""TFRecord framing, as TensorBoard event files use it:
``u64 length | u32 masked_crc32c(length bytes) | data | u32 masked_crc32c(data)``, all little-endian, with
``masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8`` (mod 2**32). Every CRC is checked, all records at once
(:mod:`.crc32c`); a record still being written (a torn tail) is dropped, a CRC mismatch is an error."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from trainprobe.errors import LogError
from trainprobe.metrics.readers.crc32c import crc32c, crc32c_many

_MASK_DELTA = 0xA282EAD8


def mask_crc(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def _mask_many(crc: np.ndarray) -> np.ndarray:
    c = crc.astype(np.uint64)
    return np.asarray(((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF, dtype=np.uint32)


def frame_record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", mask_crc(crc32c(length)))
        + data
        + struct.pack("<I", mask_crc(crc32c(data)))
    )


def _stored(arr: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.asarray(arr[at[:, None] + np.arange(4)].copy().view("<u4").ravel(), dtype=np.uint32)


def read_records(path: Path) -> list[bytes]:
    """Every whole record's data, CRCs checked."""
    buf = path.read_bytes()
    starts: list[int] = []
    lengths: list[int] = []
    pos = 0
    end = len(buf)
    while pos + 12 <= end:
        (length,) = struct.unpack_from("<Q", buf, pos)
        if length > end - pos - 16:
            break  # a record being written right now (or a truncated file): stop at the last whole one
        starts.append(pos)
        lengths.append(length)
        pos += 16 + length
    if not starts:
        if buf:
            raise LogError(
                str(path), "no complete TFRecord in the file", hint="is it a TensorBoard event file?"
            )
        return []
    arr = np.frombuffer(buf, dtype=np.uint8)
    at = np.array(starts, dtype=np.int64)
    n = np.array(lengths, dtype=np.int64)
    header_ok = _mask_many(crc32c_many(arr, at, np.full(at.size, 8))) == _stored(arr, at + 8)
    data_ok = _mask_many(crc32c_many(arr, at + 12, n)) == _stored(arr, at + 12 + n)
    for what, ok in (("length", header_ok), ("data", data_ok)):
        bad = np.flatnonzero(~ok)
        if bad.size:
            i = int(bad[0])
            raise LogError(
                str(path), f"record {i} at byte {int(at[i])}: {what} CRC mismatch", hint="the file is corrupt"
            )
    return [buf[p + 12 : p + 12 + k] for p, k in zip(starts, lengths, strict=True)]


__all__ = ["frame_record", "mask_crc", "read_records"]
