"""TFRecord framing, as TensorBoard event files use it:
``u64 length | u32 masked_crc32c(length bytes) | data | u32 masked_crc32c(data)``, all little-endian, with
``masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8`` (mod 2**32). Every CRC is checked, all the records of a
chunk at once (:mod:`.crc32c`); a record still being written (a torn tail) is dropped, a CRC mismatch is an
error. The file is read in chunks of whole records, not mapped: a file cut while read ends the records, where
a map would fault (SIGBUS)."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from trainprobe.errors import LogError
from trainprobe.metrics.readers.crc32c import crc32c, crc32c_many

_MASK_DELTA = 0xA282EAD8
#: bytes read at a time (whole records are taken from each read, the rest waits for the next)
_CHUNK = 4 << 20


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


def read_records(path: Path) -> Iterator[bytes]:
    """Every whole record's data, CRCs checked, read in chunks of whole records: memory holds a chunk and
    the longest record, never the whole file."""
    index = 0  # records before this chunk
    with open(path, "rb") as fh:
        base, buf, need = 0, b"", _CHUNK
        while True:
            left = max(0, os.fstat(fh.fileno()).st_size - fh.tell())
            got = fh.read(min(max(need, _CHUNK), left)) if left else b""
            buf += got
            starts, lengths, used = _whole_records(buf)
            if starts:
                _check_crcs(path, buf, starts, lengths, index, base)
                yield from (buf[p + 12 : p + 12 + k] for p, k in zip(starts, lengths, strict=True))
                index += len(starts)
            buf, base = buf[used:], base + used
            if not got:
                break  # what is left is a record being written right now (or a truncated file)
            # the next record may be longer than a chunk: read it whole next time
            need = 16 + struct.unpack_from("<Q", buf)[0] - len(buf) if len(buf) >= 8 else _CHUNK
    if not index and base + len(buf):
        raise LogError(str(path), "no complete TFRecord in the file", hint="is it a TensorBoard event file?")


def _whole_records(buf: bytes) -> tuple[list[int], list[int], int]:
    """(start, data length) of each whole record at the head of ``buf``, and the bytes they take."""
    starts: list[int] = []
    lengths: list[int] = []
    pos = 0
    end = len(buf)
    while pos + 12 <= end:
        (length,) = struct.unpack_from("<Q", buf, pos)
        if length > end - pos - 16:
            break
        starts.append(pos)
        lengths.append(length)
        pos += 16 + length
    return starts, lengths, pos


def _check_crcs(path: Path, buf: bytes, starts: list[int], lengths: list[int], index: int, base: int) -> None:
    """Every length and data CRC of the records at ``starts`` (``index`` records and ``base`` bytes into
    the file), all at once; raise LogError naming the first that does not match."""
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
                str(path),
                f"record {index + i} at byte {base + int(at[i])}: {what} CRC mismatch",
                hint="the file is corrupt",
            )


__all__ = ["frame_record", "mask_crc", "read_records"]
