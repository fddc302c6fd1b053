"""The binary record log of a W&B run (``run-<id>.wandb``, what offline runs keep), read without wandb.

Framing (LevelDB's log format, as wandb's datastore writes it): a 7-byte file header ``":W&B"``, a
little-endian u16 magic ``0xBEE1`` and a u8 version; then 32 KiB blocks of records, each
``u32 crc | u16 length | u8 type | data``, where ``crc`` is zlib's CRC-32 of ``data`` seeded with the
CRC-32 of the type byte, and ``type`` is FULL (1), or FIRST (2), MIDDLE (3) … LAST (4) for a record cut
across blocks; fewer than 7 bytes left in a block are zero padding. A record still being written (a torn
tail) is dropped.

Each record is a protobuf ``wandb_internal.Record``; the fields used (wandb/proto/wandb_internal.proto):
Record: 2 history, 4 output, 13 output_raw, 17 run. HistoryRecord: 1 item (repeated), 2 step
(HistoryStep: 1 num). HistoryItem: 1 key, 2 nested_key (repeated), 16 value_json. OutputRecord /
OutputRawRecord: 2 timestamp (Timestamp: 1 seconds, 2 nanos), 3 line. RunRecord: 1 run_id, 8 display_name.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from trainprobe.errors import LogError
from trainprobe.metrics.axis import finish_run
from trainprobe.metrics.events import Event
from trainprobe.metrics.readers import protobuf as pb
from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.readers.text.parser import LineParser
from trainprobe.metrics.table import ColumnBuilder, RunLog, Unread

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32768
_RECORD_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_TYPE_CRC = {t: zlib.crc32(bytes([t])) for t in (FULL, FIRST, MIDDLE, LAST)}
_MAX_RECORD = 256 << 20
_READ = 1 << 20  # bytes read at a time
_SEEK_DATA: int | None = getattr(os, "SEEK_DATA", None)


@dataclass
class WandbRun:
    """What a record log holds: history rows, console lines (with their time) and the run's name."""

    rows: list[dict[str, float]] = field(default_factory=list)
    output: list[tuple[float | None, str]] = field(default_factory=list)
    name: str | None = None
    problem: str | None = None  # why reading stopped early (a CRC mismatch, a broken record)


class _Window:
    """Bytes of a file by absolute position, read forward in bounded pieces (a record log is streamed, never
    read whole: memory is the longest record, not the file)."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.base = 0
        self.data = b""

    def get(self, start: int, n: int) -> bytes:
        """Bytes ``[start, start + n)`` (fewer at the end of the file); positions only move forward."""
        have_end = self.base + len(self.data)
        if start < self.base or start > have_end:
            self.fh.seek(start)
            self.base, self.data = start, b""
        elif start + n > have_end:
            self.data = self.data[start - self.base :]
            self.base = start
        if start + n > self.base + len(self.data):
            self.fh.seek(self.base + len(self.data))
            self.data += self.fh.read(max(start + n - self.base - len(self.data), _READ))
        return self.data[start - self.base : start - self.base + n]

    def next_data(self, pos: int) -> int:
        """The first block at or after ``pos`` that the file stores (a sparse hole skipped, not read)."""
        if _SEEK_DATA is None:
            return pos
        try:
            at = os.lseek(self.fh.fileno(), pos, _SEEK_DATA)
        except (OSError, io.UnsupportedOperation) as exc:
            if getattr(exc, "errno", None) == errno.ENXIO:  # nothing but a hole to the end
                return max(pos, os.fstat(self.fh.fileno()).st_size)
            return pos
        return max(pos, at - at % BLOCK)


def iter_records(source: bytes | BinaryIO) -> Iterator[bytes]:
    """The data of each whole record; raises ``LogError``-worthy ``ValueError`` on a CRC mismatch."""
    window = _Window(io.BytesIO(source) if isinstance(source, bytes) else source)
    if not window.get(0, len(HEADER)).startswith(HEADER[:4]):
        raise ValueError("no W&B header")
    pos = len(HEADER)
    parts: list[bytes] = []
    size = 0
    while True:
        left = BLOCK - pos % BLOCK
        if left < _RECORD_HEADER:
            pos += left
        head = window.get(pos, _RECORD_HEADER)
        if len(head) < _RECORD_HEADER:
            return
        crc, length, kind = struct.unpack("<IHB", head)
        data_at = pos + _RECORD_HEADER
        if kind == 0 and length == 0 and crc == 0:
            # zero fill (a preallocated or padded block, a sparse hole): on to the next block that holds data
            pos = window.next_data(pos + BLOCK - pos % BLOCK)
            continue
        data = window.get(data_at, length)
        if len(data) < length:
            return  # being written right now
        if kind not in _TYPE_CRC or zlib.crc32(data, _TYPE_CRC[kind]) != crc:
            raise ValueError(f"record at byte {pos}: CRC mismatch")
        pos = data_at + length
        if kind == FULL:
            parts, size = [], 0
            yield data
            continue
        if kind == FIRST:
            parts, size = [data], length
        elif parts:
            parts.append(data)
            size += length
            if size > _MAX_RECORD:
                raise ValueError(f"a record over {_MAX_RECORD} bytes")
            if kind == LAST:
                yield b"".join(parts)
                parts, size = [], 0


def _number(value_json: str) -> float | None:
    try:
        value = json.loads(value_json)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.copysign(math.inf, value)
    return None


def _history(data: bytes) -> dict[str, float]:
    row: dict[str, float] = {}
    step: float | None = None
    for number, _wire, value in pb.fields(data):
        if number == 1 and isinstance(value, bytes):
            name, nested, raw = "", [], ""
            for n2, _w2, v2 in pb.fields(value):
                if n2 == 1:
                    name = pb.as_text(v2)
                elif n2 == 2:
                    nested.append(pb.as_text(v2))
                elif n2 == 16:
                    raw = pb.as_text(v2)
            number_value = _number(raw)
            key = name or "/".join(nested)
            if key and number_value is not None:
                row[key] = number_value
        elif number == 2 and isinstance(value, bytes):
            for n2, _w2, v2 in pb.fields(value):
                if n2 == 1 and isinstance(v2, int):
                    step = float(pb.as_signed(v2))
    if step is not None and "_step" not in row:
        row["_step"] = step
    return row


def _output(data: bytes) -> tuple[float | None, str]:
    when: float | None = None
    line = ""
    for number, _wire, value in pb.fields(data):
        if number == 2 and isinstance(value, bytes):
            seconds = nanos = 0
            for n2, _w2, v2 in pb.fields(value):
                if n2 == 1 and isinstance(v2, int):
                    seconds = pb.as_signed(v2)
                elif n2 == 2 and isinstance(v2, int):
                    nanos = pb.as_signed(v2)
            when = seconds + nanos / 1e9
        elif number == 3:
            line = pb.as_text(value)
    return when, line


def read_wandb_records(path: Path) -> WandbRun:
    out = WandbRun()
    with open(path, "rb") as fh:
        _read_into(out, fh, path)
    return out


def _read_into(out: WandbRun, fh: BinaryIO, path: Path) -> None:
    try:
        for data in iter_records(fh):
            for number, _wire, value in pb.fields(data):
                if not isinstance(value, bytes):
                    continue
                if number == 2:
                    row = _history(value)
                    if row:
                        out.rows.append(row)
                elif number in (4, 13):
                    out.output.append(_output(value))
                elif number == 17:
                    for n2, _w2, v2 in pb.fields(value):
                        if n2 == 8 and pb.as_text(v2):
                            out.name = pb.as_text(v2)
    except ValueError as exc:
        if not out.rows:
            raise LogError(
                str(path), f"not a readable W&B record log ({exc})", hint="is the file damaged?"
            ) from None
        out.problem = str(exc)


def events_of(
    lines: Iterable[tuple[float | None, str]], name: str, path: str, options: ReadOptions
) -> RunLog:
    """The console output of a run, read as a text log (its saves and other events)."""
    parser = LineParser(name, path, event_patterns=list(options.event_patterns))
    for _when, text in lines:
        for line in text.splitlines():
            parser.feed_line(line)
    return parser.run()


def wandb_run(path: Path, options: ReadOptions, *, name: str | None = None) -> RunLog:
    got = read_wandb_records(path)
    builder = ColumnBuilder()
    for row in got.rows:
        builder.add_row(row)
    builder.units["_timestamp"] = "s"
    run_name = name or got.name or path.stem.removeprefix("run-")
    run = finish_run(builder, name=run_name, path=str(path), fmt="wandb")
    if got.output:
        console = events_of(got.output, run_name, str(path), options)
        run.events = _onto(console, run)
    if got.problem:
        run.unread = [Unread(0, "", f"reading stopped early: {got.problem}")]
    return run


def _onto(console: RunLog, run: RunLog) -> list[Event]:
    """Console events placed on the history's rows by step."""
    out: list[Event] = []
    for e in console.events:
        if e.step == e.step:
            e.row = int(np.searchsorted(run.steps, e.step, side="right")) if len(run) else 0
            out.append(e)
    return out


class WandbRecordsReader:
    name = "wandb"

    def sniff(self, path: Path, head: bytes) -> bool:
        return head.startswith(HEADER[:6])

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        return [wandb_run(path, options)]


# -- writing (tests build record logs with this, from the framing above) ------------------------------------
def frame_records(records: Iterable[bytes]) -> bytes:
    out = bytearray(HEADER)
    for data in records:
        first = True
        while True:
            left = BLOCK - len(out) % BLOCK
            if left < _RECORD_HEADER:
                out += b"\x00" * left
                left = BLOCK
            room = left - _RECORD_HEADER
            piece, data = data[:room], data[room:]
            kind = (FULL if not data else FIRST) if first else (LAST if not data else MIDDLE)
            out += struct.pack("<IHB", zlib.crc32(piece, _TYPE_CRC[kind]), len(piece), kind) + piece
            first = False
            if not data:
                break
    return bytes(out)


def history_record(step: int, values: dict[str, float]) -> bytes:
    items = b"".join(
        pb.len_field(1, pb.len_field(1, k.encode()) + pb.len_field(16, json.dumps(v).encode()))
        for k, v in values.items()
    )
    return pb.len_field(2, items + pb.len_field(2, pb.int_field(1, step)))


def output_record(line: str, seconds: int = 0) -> bytes:
    return pb.len_field(13, pb.len_field(2, pb.int_field(1, seconds)) + pb.len_field(3, line.encode()))


__all__ = [
    "HEADER",
    "WandbRecordsReader",
    "frame_records",
    "history_record",
    "output_record",
    "read_wandb_records",
    "wandb_run",
]
