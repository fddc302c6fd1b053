"""TensorBoard event files (``events.out.tfevents.*``) without TensorFlow: TFRecord framing with masked CRC32C
checks, and just enough protobuf to read ``Event{wall_time, step, summary{value{tag, simple_value|tensor}}}``.

Record framing (TFRecord): ``u64 length | u32 masked_crc32c(length bytes) | data | u32 masked_crc32c(data)``,
all little-endian; ``masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8`` (mod 2**32). CRC32C is the Castagnoli
polynomial (reflected 0x82F63B78); its check value, crc32c(b"123456789"), is 0xE3069283.

Protobuf field numbers used (tensorflow/core/util/event.proto, framework/summary.proto, tensor.proto):
Event: 1 wall_time (double), 2 step (int64), 5 summary. Summary: 1 value (repeated). Summary.Value: 1 tag,
2 simple_value (float), 8 tensor. TensorProto: 1 dtype, 4 tensor_content, 5 float_val, 6 double_val,
7 int_val, 10 int64_val, 13 half_val.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from trainprobe.errors import LogError
from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.table import ColumnBuilder, RunLog, finish_run

_POLY = 0x82F63B78
_MASK_DELTA = 0xA282EAD8


def _make_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        table[i] = crc
    return table


CRC_TABLE = _make_table()
_TABLE_LIST = [int(x) for x in CRC_TABLE]


def crc32c(data: bytes) -> int:
    """CRC32C of one buffer (table-driven, pure Python: for single records and tests)."""
    crc = 0xFFFFFFFF
    table = _TABLE_LIST
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c_many(rows: np.ndarray) -> np.ndarray:
    """CRC32C of each row of a (n, length) uint8 array at once: one vector step per byte position."""
    crc = np.full(rows.shape[0], 0xFFFFFFFF, dtype=np.uint32)
    for j in range(rows.shape[1]):
        crc = CRC_TABLE[(crc ^ rows[:, j]) & 0xFF] ^ (crc >> np.uint32(8))
    return np.asarray(crc ^ np.uint32(0xFFFFFFFF), dtype=np.uint32)


def mask_crc(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def _mask_many(crc: np.ndarray) -> np.ndarray:
    c = crc.astype(np.uint64)
    return np.asarray((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + _MASK_DELTA & 0xFFFFFFFF, dtype=np.uint32)


# -- writing (tests and the demo build event files with this, from the spec above)
# ----------------------------
def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, wire: int) -> bytes:
    return _varint((number << 3) | wire)


def _len_field(number: int, payload: bytes) -> bytes:
    return _field(number, 2) + _varint(len(payload)) + payload


def encode_scalar_event(
    step: int, wall_time: float, values: dict[str, float], *, as_tensor: bool = False
) -> bytes:
    """An Event with one summary value per tag, as ``simple_value`` (TF1 style) or a float tensor (TF2
    style)."""
    summary = b""
    for tag, value in values.items():
        if as_tensor:
            tensor = _field(1, 0) + _varint(1) + _len_field(2, b"") + _len_field(5, struct.pack("<f", value))
            body = _len_field(1, tag.encode()) + _len_field(8, tensor)
        else:
            body = _len_field(1, tag.encode()) + _field(2, 5) + struct.pack("<f", value)
        summary += _len_field(1, body)
    return _field(1, 1) + struct.pack("<d", wall_time) + _field(2, 0) + _varint(step) + _len_field(5, summary)


def frame_record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", mask_crc(crc32c(length)))
        + data
        + struct.pack("<I", mask_crc(crc32c(data)))
    )


def write_event_file(
    path: Path, rows: Iterable[tuple[int, float, dict[str, float]]], *, as_tensor: bool = False
) -> None:
    """Write ``(step, wall_time, {tag: value})`` rows as a TensorBoard event file (with the file_version
    event)."""
    version = _field(1, 1) + struct.pack("<d", 0.0) + _len_field(3, b"brain.Event:2")
    with open(path, "wb") as fh:
        fh.write(frame_record(version))
        for step, wall, values in rows:
            fh.write(frame_record(encode_scalar_event(step, wall, values, as_tensor=as_tensor)))


# -- reading ------------------------------------------------------------------------------------------------
def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for each field; LEN values as bytes, fixed ones as raw ints."""
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
            yield number, wire, value
        elif wire == 1:
            yield number, wire, buf[pos : pos + 8]
            pos += 8
        elif wire == 2:
            size, pos = _read_varint(buf, pos)
            yield number, wire, buf[pos : pos + size]
            pos += size
        elif wire == 5:
            yield number, wire, buf[pos : pos + 4]
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


_TENSOR_DTYPES = {1: "<f4", 2: "<f8", 3: "<i4", 9: "<i8", 19: "<f2"}


def _tensor_value(buf: bytes) -> float | None:
    dtype = 1
    content = b""
    packed: dict[int, bytes] = {}
    for number, _wire, value in _fields(buf):
        if number == 1 and isinstance(value, int):
            dtype = value
        elif number == 4 and isinstance(value, bytes):
            content = value
        elif number in (5, 6, 7, 10, 13) and isinstance(value, bytes):
            packed[number] = value
        elif number in (7, 10, 13) and isinstance(value, int):
            packed[number] = _varint(value)
    if content and dtype in _TENSOR_DTYPES:
        arr = np.frombuffer(content, dtype=_TENSOR_DTYPES[dtype])
        return float(arr[0]) if arr.size == 1 else None
    if 5 in packed and len(packed[5]) == 4:
        return float(struct.unpack("<f", packed[5])[0])
    if 6 in packed and len(packed[6]) == 8:
        return float(struct.unpack("<d", packed[6])[0])
    for number in (7, 10):
        if number in packed:
            value, _ = _read_varint(packed[number], 0)
            return float(value - (1 << 64) if value >= 1 << 63 else value)
    if 13 in packed:
        bits, _ = _read_varint(packed[13], 0)
        return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])
    return None


def _decode_event(data: bytes) -> tuple[float, int, dict[str, float]]:
    wall = float("nan")
    step = 0
    values: dict[str, float] = {}
    for number, _wire, value in _fields(data):
        if number == 1 and isinstance(value, bytes):
            wall = struct.unpack("<d", value)[0]
        elif number == 2 and isinstance(value, int):
            step = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 5 and isinstance(value, bytes):
            for snum, _w, sval in _fields(value):
                if snum != 1 or not isinstance(sval, bytes):
                    continue
                tag = ""
                scalar: float | None = None
                for vnum, _vw, vval in _fields(sval):
                    if vnum == 1 and isinstance(vval, bytes):
                        tag = vval.decode("utf-8", errors="replace")
                    elif vnum == 2 and isinstance(vval, bytes):
                        scalar = struct.unpack("<f", vval)[0]
                    elif vnum == 8 and isinstance(vval, bytes):
                        scalar = _tensor_value(vval)
                if tag and scalar is not None:
                    values[tag] = scalar
    return wall, step, values


def read_records(path: Path) -> list[bytes]:
    """Every record's data, CRCs checked (vectorized over records of equal length). A torn tail is dropped."""
    buf = path.read_bytes()
    offsets: list[tuple[int, int]] = []
    pos = 0
    while pos + 12 <= len(buf):
        (length,) = struct.unpack_from("<Q", buf, pos)
        if pos + 16 + length > len(buf):
            break  # a record being written right now (or a truncated file): stop at the last whole one
        offsets.append((pos, length))
        pos += 16 + length
    if not offsets:
        if buf:
            raise LogError(
                str(path), "no complete TFRecord in the file", hint="is it a TensorBoard event file?"
            )
        return []
    arr = np.frombuffer(buf, dtype=np.uint8)
    starts = np.array([p for p, _ in offsets], dtype=np.int64)
    lengths = np.array([n for _, n in offsets], dtype=np.int64)
    header_crc = _mask_many(crc32c_many(arr[starts[:, None] + np.arange(8)]))
    stored_header = arr[starts[:, None] + 8 + np.arange(4)].copy().view("<u4").ravel()
    bad = np.flatnonzero(header_crc != stored_header)
    if bad.size:
        raise LogError(
            str(path),
            f"record {int(bad[0])} at byte {int(starts[bad[0]])}: length CRC mismatch",
            hint="the file is corrupt",
        )
    for length in np.unique(lengths):
        idx = np.flatnonzero(lengths == length)
        data_start = starts[idx] + 12
        rows = (
            arr[data_start[:, None] + np.arange(int(length))] if length else np.zeros((idx.size, 0), np.uint8)
        )
        got = _mask_many(crc32c_many(rows))
        stored = arr[(data_start + length)[:, None] + np.arange(4)].copy().view("<u4").ravel()
        bad = np.flatnonzero(got != stored)
        if bad.size:
            which = int(idx[bad[0]])
            raise LogError(
                str(path),
                f"record {which} at byte {int(starts[which])}: data CRC mismatch",
                hint="the file is corrupt",
            )
    return [buf[p + 12 : p + 12 + n] for p, n in offsets]


class TensorBoardReader:
    name = "tensorboard"

    def sniff(self, path: Path, head: bytes) -> bool:
        if len(head) < 12:
            return False
        stored: int = struct.unpack_from("<I", head, 8)[0]
        return stored == mask_crc(crc32c(head[:8]))

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        builder = ColumnBuilder()
        walls: list[float] = []
        for data in read_records(path):
            try:
                wall, step, values = _decode_event(data)
            except (ValueError, IndexError, struct.error):
                raise LogError(str(path), "an event record does not decode as a protobuf Event") from None
            if values:
                builder.add_row({"step": float(step), **values})
                walls.append(wall)
        name = path.parent.name if path.name.startswith("events.out.tfevents") else path.stem
        return [finish_run(builder, name=name, path=str(path), fmt="tensorboard", wall=np.array(walls))]
