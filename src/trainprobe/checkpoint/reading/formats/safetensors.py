"""safetensors: an 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape and
byte range, then the data. No pickle, so nothing to execute; the checks are about sizes that lie."""

from __future__ import annotations

import json
import struct
from typing import Any

from trainprobe.checkpoint.reading.base import (
    MAX_NDIM,
    Checkpoint,
    Storage,
    TensorRecord,
    brief,
    check_tensor_count,
)
from trainprobe.checkpoint.reading.dtypes import SAFETENSORS_DTYPES, lookup
from trainprobe.checkpoint.reading.mapping import map_file
from trainprobe.errors import CorruptCheckpointError

_MAX_HEADER = 100 << 20


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides: list[int] = []
    acc = 1
    for dim in reversed(shape):
        strides.append(acc)
        acc *= dim
    return tuple(reversed(strides))


class _Duplicate(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Python keeps a repeated key's last value, other readers its first: they would see different tensors.
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return out


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62


def _parse_header(raw: bytes, path: str) -> dict[str, Any]:
    refused = "the safetensors library refuses this file"
    try:
        header = json.loads(raw, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except _Duplicate as exc:
        raise CorruptCheckpointError(
            path, f"the safetensors header names {brief(exc.key, 60)} twice", hint=refused
        ) from None
    except RecursionError:
        raise CorruptCheckpointError(path, "the safetensors header is nested too deeply to read") from None
    except MemoryError:
        raise CorruptCheckpointError(path, "the safetensors header is too large to parse") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptCheckpointError(
            path, f"safetensors header is not valid JSON ({brief(str(exc), 160)})"
        ) from None
    if not isinstance(header, dict):
        raise CorruptCheckpointError(path, "safetensors header is not a JSON object")
    meta = header.get("__metadata__")
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise CorruptCheckpointError(
            path, "the safetensors __metadata__ is not a map of strings", hint=refused
        )
    return header


def _entry(name: str, entry: Any, path: str) -> tuple[str, tuple[int, ...], int, int]:
    """(dtype, shape, begin, end) of one header entry, each checked as the safetensors library does."""
    fields = entry if isinstance(entry, dict) else {}
    st_dtype, shape, offsets = fields.get("dtype"), fields.get("shape"), fields.get("data_offsets")
    if not (
        isinstance(st_dtype, str)
        and isinstance(shape, list)
        and len(shape) <= MAX_NDIM
        and all(_is_count(d) for d in shape)
        and isinstance(offsets, list)
        and len(offsets) == 2
        and all(_is_count(x) for x in offsets)
        and offsets[0] <= offsets[1]
    ):
        raise CorruptCheckpointError(
            path, f"tensor {brief(name, 60)}: malformed header entry {brief(entry, 120)}"
        )
    return st_dtype, tuple(shape), offsets[0], offsets[1]


def _tiling_problem(spans: list[tuple[int, int, str]], data_len: int) -> str | None:
    """Whether the tensors' byte ranges tile the data exactly, as the safetensors library requires (no
    overlap, no gap, nothing after the last): what is wrong, or None."""
    spans.sort()
    at, last = 0, ""
    for begin, end, name in spans:
        if begin < at:
            pair = f"{brief(last, 60)} and {brief(name, 60)}"
            return f"tensors {pair} overlap in the data (bytes [{begin:,}, {at:,}))"
        if begin > at:
            return f"bytes [{at:,}, {begin:,}) of the data belong to no tensor"
        at, last = end, name
    if at < data_len:
        return f"{data_len - at:,} bytes after the last tensor's data belong to no tensor"
    return None


def read_safetensors(buffer: Any, path: str) -> tuple[dict[str, Any], list[TensorRecord]]:
    """Parse a safetensors file mapped in ``buffer``: ({name: record, "__metadata__": {...}}, records).

    Checked as the safetensors library checks (what it refuses is ``corrupt`` here, named): the header is
    JSON without repeated names, NaN or Infinity; every entry has a known dtype, a shape of non-negative
    integers and a byte range that fits it; the ranges tile the data (no overlap, no gap)."""
    size = len(buffer)
    if size < 8:
        raise CorruptCheckpointError(path, f"only {size} bytes, too short for a safetensors header")
    (header_len,) = struct.unpack("<Q", bytes(buffer[:8]))
    if header_len > _MAX_HEADER:
        raise CorruptCheckpointError(
            path, f"safetensors header claims {header_len:,} bytes, more than 100 MB"
        )
    if 8 + header_len > size:
        raise CorruptCheckpointError(
            path, f"truncated at byte {size:,} of at least {8 + header_len:,} (inside the safetensors header)"
        )
    raw = bytes(buffer[8 : 8 + header_len])
    # Every entry has its data_offsets: counted before parsing, a header of a million tensors is refused
    # in milliseconds instead of parsed for seconds (and a gigabyte) first.
    check_tensor_count(path, raw.count(b'"data_offsets"'))
    header = _parse_header(raw, path)
    check_tensor_count(path, len(header) - ("__metadata__" in header))
    data_start = 8 + header_len
    data_len = size - data_start
    entries = [(name, *_entry(name, entry, path)) for name, entry in header.items() if name != "__metadata__"]
    needed = max((end for *_rest, end in entries), default=0)
    if needed > data_len:
        raise CorruptCheckpointError(
            path, f"truncated at byte {size:,} of {data_start + needed:,} (the header's data ends there)"
        )
    objects: dict[str, Any] = {}
    if "__metadata__" in header:
        objects["__metadata__"] = header["__metadata__"]
    records: list[TensorRecord] = []
    for name, st_dtype, shape, begin, end in entries:
        torch_dtype = SAFETENSORS_DTYPES.get(st_dtype, st_dtype.lower())
        info = lookup(torch_dtype)
        if info is None:
            raise CorruptCheckpointError(
                path, f"tensor {brief(name, 60)} has dtype {brief(st_dtype, 40)}, unknown to trainprobe"
            )
        numel = 1
        for d in shape:
            numel *= d
        if end - begin != numel * info.itemsize:
            raise CorruptCheckpointError(
                path,
                f"tensor {name}: header says {st_dtype}{list(shape)} ({numel * info.itemsize} bytes) "
                f"but gives the byte range [{begin}, {end})",
                hint="the header lies about sizes",
            )
        storage = Storage(buffer, data_start + begin, end - begin, key=name, file=path)
        rec = TensorRecord(name, info.name, shape, _contiguous_strides(shape), 0, storage)
        objects[name] = rec
        records.append(rec)
    problem = _tiling_problem([(b, e, n) for n, _d, _s, b, e in entries], data_len)
    if problem is not None:
        raise CorruptCheckpointError(path, problem, hint="the safetensors library refuses this file")
    return objects, records


class SafetensorsFormat:
    name = "safetensors"

    def sniff(self, path: str, head: bytes) -> bool:
        if len(head) < 10:
            return False
        (n,) = struct.unpack("<Q", head[:8])
        return 2 <= n <= _MAX_HEADER and head[8:9] == b"{"

    def open(self, path: str) -> Checkpoint:
        buffer = map_file(path)
        objects, records = read_safetensors(buffer, path)
        return Checkpoint(path, self.name, objects, records, [], [buffer])
