"""CRC32C (Castagnoli, reflected polynomial 0x82F63B78) of many byte strings at once, in numpy.

TFRecord frames every record with masked CRC32Cs; a pure-Python loop over bytes reads a few MB/s, and a
loop over byte *positions* (one numpy step per position, all records of one length together) takes as many
Python steps as the longest record, and as many again for every other record length. Here the work is over
bytes and the Python steps are few, whatever the lengths:

1. A CRC with the usual start value ``0xFFFFFFFF`` equals the CRC from zero ("raw") of the same bytes with
   the first four complemented, xor ``0xFFFFFFFF`` at the end; and a raw CRC does not change when zero bytes
   are put *before* the data. So each record (complemented head) is padded in front with zeros to a whole
   number of lanes of ``LANE`` bytes.
2. The raw CRC of every lane of every record, all lanes in parallel: ``LANE`` numpy steps.
3. Lanes combine: ``raw(A + B) = shift(raw(A), len(B)) ^ raw(B)``, where shifting by ``n`` zero bytes is
   linear (a 32×32 bit matrix over GF(2), applied with four 256-entry tables). Groups of ``GROUP`` values
   fold into one, level by level (``GROUP`` numpy steps each), until each record has one value.

Records shorter than four bytes go through the byte loop (there are few, and they are short).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

POLY = 0x82F63B78
LANE = 64
GROUP = 64
_BATCH_BYTES = 8 << 20  # a batch's index arrays take 8 bytes per byte of data


def _byte_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ POLY if crc & 1 else crc >> 1
        table[i] = crc
    return table


TABLE = _byte_table()
_TABLE_LIST = [int(x) for x in TABLE]


def crc32c_bytes(data: bytes, crc: int = 0) -> int:
    """CRC32C of one short buffer, byte by byte (``crc``: a previous CRC to continue)."""
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc = _TABLE_LIST[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# -- shifting a raw CRC over n zero bytes ---------------------------------------------------------------
def _apply(columns: tuple[int, ...], value: int) -> int:
    out = 0
    bit = 0
    while value:
        if value & 1:
            out ^= columns[bit]
        value >>= 1
        bit += 1
    return out


def _zero_byte(value: int) -> int:
    return _TABLE_LIST[value & 0xFF] ^ (value >> 8)


@lru_cache(maxsize=64)
def _shift_columns(n: int) -> tuple[int, ...]:
    """Columns of the matrix that shifts a raw CRC over ``n`` zero bytes (by squaring)."""
    if n == 0:
        return tuple(1 << i for i in range(32))
    if n == 1:
        return tuple(_zero_byte(1 << i) for i in range(32))
    half = _shift_columns(n // 2)
    square = tuple(_apply(half, c) for c in half)
    if n % 2:
        one = _shift_columns(1)
        return tuple(_apply(one, c) for c in square)
    return square


@lru_cache(maxsize=64)
def _shift_tables(n: int) -> np.ndarray:
    """Four 256-entry tables: shift(v) = t[0][v & 255] ^ t[1][(v >> 8) & 255] ^ t[2][…] ^ t[3][v >> 24]."""
    columns = _shift_columns(n)
    tables = np.zeros((4, 256), dtype=np.uint32)
    for b in range(4):
        for value in range(256):
            tables[b, value] = _apply(columns, value << (8 * b))
    return tables


def _shift(values: np.ndarray, n: int) -> np.ndarray:
    t = _shift_tables(n)
    v = values.astype(np.uint32)
    return np.asarray(
        t[0][v & 0xFF] ^ t[1][(v >> 8) & 0xFF] ^ t[2][(v >> 16) & 0xFF] ^ t[3][v >> 24], dtype=np.uint32
    )


# -- many records ----------------------------------------------------------------------------------------
def _raw_lanes(lanes: np.ndarray) -> np.ndarray:
    """Raw CRC (start 0, no final xor) of each row of an (n, LANE) uint8 array."""
    crc = np.zeros(lanes.shape[0], dtype=np.uint32)
    shift8 = np.uint32(8)
    for j in range(lanes.shape[1]):
        crc = TABLE[(crc ^ lanes[:, j]) & 0xFF] ^ (crc >> shift8)
    return crc


def _fold(values: np.ndarray, counts: np.ndarray, span: int) -> np.ndarray:
    """One raw CRC per record from ``counts[r]`` consecutive values per record, each over ``span`` bytes."""
    while True:
        if np.all(counts == 1):
            return values
        groups = (counts + GROUP - 1) // GROUP
        padded = groups * GROUP
        # records' values placed at the end of their padded run (zeros in front change nothing)
        out_starts = np.concatenate(([0], np.cumsum(padded)[:-1]))
        in_starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        flat = np.zeros(int(padded.sum()), dtype=np.uint32)
        record_of = np.repeat(np.arange(counts.size), counts)
        position = np.arange(values.size) - in_starts[record_of]
        flat[out_starts[record_of] + (padded - counts)[record_of] + position] = values
        block = flat.reshape(-1, GROUP)
        acc = np.zeros(block.shape[0], dtype=np.uint32)
        for j in range(GROUP):
            acc = _shift(acc, span) ^ block[:, j]
        values, counts, span = acc, groups, span * GROUP


def crc32c_many(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """CRC32C of ``buf[starts[i] : starts[i] + lengths[i]]`` for every i (``buf``: uint8)."""
    out = np.zeros(starts.size, dtype=np.uint32)
    short = np.flatnonzero(lengths < 4)
    for i in short:
        s, n = int(starts[i]), int(lengths[i])
        out[i] = crc32c_bytes(buf[s : s + n].tobytes())
    long = np.flatnonzero(lengths >= 4)
    if long.size == 0:
        return out
    # batches of records, so the padded lanes of a huge file never sit in memory at once
    order = long
    batch: list[int] = []
    size = 0
    for i in order.tolist():
        batch.append(i)
        size += int(lengths[i]) + LANE
        if size >= _BATCH_BYTES:
            out[batch] = _crc_batch(buf, starts[batch], lengths[batch])
            batch, size = [], 0
    if batch:
        out[batch] = _crc_batch(buf, starts[batch], lengths[batch])
    return out


def _crc_batch(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    lanes_per = (lengths + LANE - 1) // LANE
    padded = lanes_per * LANE
    total = int(padded.sum())
    data = np.zeros(total, dtype=np.uint8)
    out_starts = np.concatenate(([0], np.cumsum(padded)[:-1]))
    pad = padded - lengths
    # copy each record to the end of its padded space: a gather of all its bytes at once
    firsts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    # per byte: where it comes from (buf) and goes to (data), as one shift per record
    shift_src = np.repeat((starts - firsts).astype(np.int64), lengths)
    shift_dst = np.repeat((out_starts + pad - firsts).astype(np.int32), lengths)
    index = np.arange(int(lengths.sum()), dtype=np.int32)
    data[index + shift_dst] = buf[index + shift_src]
    head = out_starts + pad
    for k in range(4):
        data[head + k] ^= 0xFF
    lanes = _raw_lanes(data.reshape(-1, LANE))
    raw = _fold(lanes, lanes_per, LANE)
    return np.asarray(raw ^ np.uint32(0xFFFFFFFF), dtype=np.uint32)


def crc32c(data: bytes) -> int:
    """CRC32C of one buffer; check value: ``crc32c(b"123456789") == 0xE3069283``."""
    if len(data) < 4096:
        return crc32c_bytes(data)
    arr = np.frombuffer(data, dtype=np.uint8)
    return int(crc32c_many(arr, np.array([0]), np.array([len(data)]))[0])


__all__ = ["POLY", "TABLE", "crc32c", "crc32c_bytes", "crc32c_many"]
