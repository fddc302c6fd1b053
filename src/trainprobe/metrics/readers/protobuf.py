"""Just enough of the protobuf wire format to read TensorBoard events and W&B records without their packages.

Fields come as ``(number, wire type, value)``: varints as ``int``, fixed 64/32-bit and length-delimited values
as ``bytes``. Every length is checked against the bytes left before it is used, and a varint is at most ten
bytes, so a damaged or hostile message ends in ``ProtobufError`` (a ``ValueError``), never an ``IndexError``,
a huge allocation or a hang.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5


class ProtobufError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ProtobufError("a varint runs past the end of the message")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("a varint longer than ten bytes")


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for each field of one message."""
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, pos = read_varint(buf, pos)
            yield number, wire, value
        elif wire == FIXED64:
            if pos + 8 > end:
                raise ProtobufError("a 64-bit field runs past the end of the message")
            yield number, wire, buf[pos : pos + 8]
            pos += 8
        elif wire == LEN:
            size, pos = read_varint(buf, pos)
            if size > end - pos:
                raise ProtobufError("a length-delimited field runs past the end of the message")
            yield number, wire, buf[pos : pos + size]
            pos += size
        elif wire == FIXED32:
            if pos + 4 > end:
                raise ProtobufError("a 32-bit field runs past the end of the message")
            yield number, wire, buf[pos : pos + 4]
            pos += 4
        else:
            raise ProtobufError(f"unsupported protobuf wire type {wire}")


def as_double(value: int | bytes) -> float | None:
    return struct.unpack("<d", value)[0] if isinstance(value, bytes) and len(value) == 8 else None


def as_float(value: int | bytes) -> float | None:
    return struct.unpack("<f", value)[0] if isinstance(value, bytes) and len(value) == 4 else None


def as_signed(value: int) -> int:
    """An int64 field's value (negative numbers travel as 2**64 - n)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def as_text(value: int | bytes) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else ""


# -- writing (tests build messages with these) ---------------------------------------------------------
def varint(value: int) -> bytes:
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


def key(number: int, wire: int) -> bytes:
    return varint((number << 3) | wire)


def len_field(number: int, payload: bytes) -> bytes:
    return key(number, LEN) + varint(len(payload)) + payload


def int_field(number: int, value: int) -> bytes:
    return key(number, VARINT) + varint(value)


__all__ = [
    "FIXED32",
    "FIXED64",
    "LEN",
    "VARINT",
    "ProtobufError",
    "as_double",
    "as_float",
    "as_signed",
    "as_text",
    "fields",
    "int_field",
    "key",
    "len_field",
    "read_varint",
    "varint",
]
