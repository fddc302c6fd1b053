"""TensorBoard event files (``events.out.tfevents.*``) without TensorFlow: TFRecord framing with masked
CRC32C checks (:mod:`.tfrecord`), and just enough protobuf (:mod:`.protobuf`) to read
``Event{wall_time, step, summary{value{tag, simple_value|tensor}}}``.

Protobuf field numbers used (tensorflow/core/util/event.proto, framework/summary.proto, tensor.proto):
Event: 1 wall_time (double), 2 step (int64), 5 summary. Summary: 1 value (repeated). Summary.Value: 1 tag,
2 simple_value (float), 8 tensor. TensorProto: 1 dtype, 4 tensor_content, 5 float_val, 6 double_val,
7 int_val, 10 int64_val, 13 half_val.

A writer puts each tag of a step in an event of its own, microseconds apart: the events of one step (in a
row) are one row, at the wall time of the first, so the stall detector sees one time per step. A tag logged
several times at one step (per-batch values under the epoch's step) gives the mean of those values.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from trainprobe.errors import LogError
from trainprobe.metrics.axis import finish_run
from trainprobe.metrics.readers import protobuf as pb
from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.readers.crc32c import crc32c
from trainprobe.metrics.readers.tfrecord import frame_record, mask_crc, read_records
from trainprobe.metrics.table import ABSENT, ColumnBuilder, RunLog

_TENSOR_DTYPES = {1: "<f4", 2: "<f8", 3: "<i4", 9: "<i8", 19: "<f2"}


# -- writing (tests and the demo build event files with this, from the spec above) -------------------------
def encode_scalar_event(
    step: int, wall_time: float, values: dict[str, float], *, as_tensor: bool = False
) -> bytes:
    """An Event with one summary value per tag, as ``simple_value`` (TF1 style) or a float tensor (TF2
    style)."""
    summary = b""
    for tag, value in values.items():
        if as_tensor:
            tensor = pb.int_field(1, 1) + pb.len_field(2, b"") + pb.len_field(5, struct.pack("<f", value))
            body = pb.len_field(1, tag.encode()) + pb.len_field(8, tensor)
        else:
            body = pb.len_field(1, tag.encode()) + pb.key(2, pb.FIXED32) + struct.pack("<f", value)
        summary += pb.len_field(1, body)
    return (
        pb.key(1, pb.FIXED64)
        + struct.pack("<d", wall_time)
        + pb.int_field(2, step)
        + pb.len_field(5, summary)
    )


def write_event_file(
    path: Path, rows: Iterable[tuple[int, float, dict[str, float]]], *, as_tensor: bool = False
) -> None:
    """Write ``(step, wall_time, {tag: value})`` rows as a TensorBoard event file (with the file_version
    event)."""
    version = pb.key(1, pb.FIXED64) + struct.pack("<d", 0.0) + pb.len_field(3, b"brain.Event:2")
    with open(path, "wb") as fh:
        fh.write(frame_record(version))
        for step, wall, values in rows:
            fh.write(frame_record(encode_scalar_event(step, wall, values, as_tensor=as_tensor)))


# -- reading ------------------------------------------------------------------------------------------------
def _first_varint(buf: bytes) -> int:
    return pb.read_varint(buf, 0)[0]


def _tensor_value(buf: bytes) -> float | None:
    dtype = 1
    content = b""
    packed: dict[int, bytes] = {}
    for number, _wire, value in pb.fields(buf):
        if number == 1 and isinstance(value, int):
            dtype = value
        elif number == 4 and isinstance(value, bytes):
            content = value
        elif number in (5, 6, 7, 10, 13) and isinstance(value, bytes):
            packed[number] = value
        elif number in (7, 10, 13) and isinstance(value, int):
            packed[number] = pb.varint(value)
    if content and dtype in _TENSOR_DTYPES:
        width = np.dtype(_TENSOR_DTYPES[dtype]).itemsize
        return (
            float(np.frombuffer(content, dtype=_TENSOR_DTYPES[dtype])[0]) if len(content) == width else None
        )
    if 5 in packed and len(packed[5]) == 4:
        return pb.as_float(packed[5])
    if 6 in packed and len(packed[6]) == 8:
        return pb.as_double(packed[6])
    for number in (7, 10):
        if number in packed:
            return float(pb.as_signed(_first_varint(packed[number])))
    if 13 in packed:
        bits = _first_varint(packed[13])
        if bits > 0xFFFF:
            return None  # a half float holds 16 bits; anything wider is no half float
        return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])
    return None


def _decode_event(data: bytes) -> tuple[float, int, dict[str, float]]:
    wall = float("nan")
    step = 0
    values: dict[str, float] = {}
    for number, _wire, value in pb.fields(data):
        if number == 1 and isinstance(value, bytes):
            got = pb.as_double(value)
            wall = wall if got is None else got
        elif number == 2 and isinstance(value, int):
            step = pb.as_signed(value)
        elif number == 5 and isinstance(value, bytes):
            for snum, _w, sval in pb.fields(value):
                if snum != 1 or not isinstance(sval, bytes):
                    continue
                tag = ""
                scalar: float | None = None
                for vnum, _vw, vval in pb.fields(sval):
                    if vnum == 1 and isinstance(vval, bytes):
                        tag = pb.as_text(vval)
                    elif vnum == 2 and isinstance(vval, bytes):
                        scalar = pb.as_float(vval)
                    elif vnum == 8 and isinstance(vval, bytes):
                        scalar = _tensor_value(vval)
                if tag and scalar is not None:
                    values[tag] = scalar
    return wall, step, values


def _group_by_step(
    events: list[tuple[float, int, dict[str, float]]],
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """One row per run of events with the same step: (tags, values with ABSENT gaps, first wall time)."""
    if not events:
        return ("step",), np.empty((0, 1)), np.empty(0)
    tags: dict[str, int] = {}
    for _wall, _step, values in events:
        for tag in values:
            tags.setdefault(tag, len(tags))
    steps = np.array([s for _w, s, _v in events], dtype=np.float64)
    walls = np.array([w for w, _s, _v in events], dtype=np.float64)
    group = np.concatenate(([0], np.cumsum(steps[1:] != steps[:-1])))
    n_groups = int(group[-1]) + 1 if group.size else 0
    sums = np.zeros((n_groups, len(tags)))
    counts = np.zeros((n_groups, len(tags)))
    for g, (_wall, _step, values) in zip(group.tolist(), events, strict=True):
        for tag, value in values.items():
            j = tags[tag]
            sums[g, j] += value
            counts[g, j] += 1
    with np.errstate(invalid="ignore"):
        table = np.where(counts > 0, sums / np.maximum(counts, 1), ABSENT)
    first = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    with np.errstate(invalid="ignore"):
        wall = np.fmin.reduceat(walls, first) if first.size else np.empty(0)
    block = np.column_stack([steps[first], table]) if n_groups else np.empty((0, len(tags) + 1))
    return ("step", *tags), block, wall


class TensorBoardReader:
    name = "tensorboard"

    def sniff(self, path: Path, head: bytes) -> bool:
        if len(head) < 12:
            return False
        stored: int = struct.unpack_from("<I", head, 8)[0]
        return stored == mask_crc(crc32c(head[:8]))

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        events: list[tuple[float, int, dict[str, float]]] = []
        for data in read_records(path):
            try:
                wall, step, values = _decode_event(data)
            except (ValueError, struct.error):
                raise LogError(str(path), "an event record does not decode as a protobuf Event") from None
            if values:
                events.append((wall, step, values))
        keys, block, walls = _group_by_step(events)
        builder = ColumnBuilder()
        builder.add_block(keys, block, wall=walls)
        name = path.parent.name if path.name.startswith("events.out.tfevents") else path.stem
        return [finish_run(builder, name=name, path=str(path), fmt="tensorboard")]


__all__ = ["TensorBoardReader", "encode_scalar_event", "write_event_file"]
