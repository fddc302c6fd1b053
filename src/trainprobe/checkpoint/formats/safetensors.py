"""safetensors: an 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape and
byte range, then the data. No pickle, so nothing to execute; the checks are about sizes that lie."""

from __future__ import annotations

import json
import struct
from typing import Any

from trainprobe.checkpoint.base import Checkpoint, Storage, TensorRecord, map_file
from trainprobe.checkpoint.dtypes import SAFETENSORS_DTYPES, lookup
from trainprobe.errors import CorruptCheckpointError

_MAX_HEADER = 100 << 20


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides: list[int] = []
    acc = 1
    for dim in reversed(shape):
        strides.append(acc)
        acc *= dim
    return tuple(reversed(strides))


def read_safetensors(buffer: Any, path: str) -> tuple[dict[str, Any], list[TensorRecord]]:
    """Parse a safetensors file mapped in ``buffer``: ({name: record, "__metadata__": {...}}, records)."""
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
    try:
        header = json.loads(bytes(buffer[8 : 8 + header_len]))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptCheckpointError(path, f"safetensors header is not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise CorruptCheckpointError(path, "safetensors header is not a JSON object")
    data_start = 8 + header_len
    data_len = size - data_start
    objects: dict[str, Any] = {}
    records: list[TensorRecord] = []
    ends = [e["data_offsets"][1] for e in header.values() if isinstance(e, dict) and "data_offsets" in e]
    needed = max((int(x) for x in ends if isinstance(x, int)), default=0)
    if needed > data_len:
        raise CorruptCheckpointError(
            path, f"truncated at byte {size:,} of {data_start + needed:,} (the header's data ends there)"
        )
    for name, entry in header.items():
        if name == "__metadata__":
            objects[name] = entry
            continue
        try:
            st_dtype = entry["dtype"]
            shape = tuple(int(d) for d in entry["shape"])
            begin, end = (int(x) for x in entry["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CorruptCheckpointError(
                path, f"tensor {name}: malformed header entry {entry!r:.120}"
            ) from None
        torch_dtype = SAFETENSORS_DTYPES.get(st_dtype, st_dtype.lower())
        info = lookup(torch_dtype)
        if info is None:
            raise CorruptCheckpointError(path, f"tensor {name} has dtype {st_dtype}, unknown to trainprobe")
        numel = 1
        for d in shape:
            numel *= d
        if end - begin != numel * info.itemsize or begin < 0:
            raise CorruptCheckpointError(
                path,
                f"tensor {name}: header says {st_dtype}{list(shape)} ({numel * info.itemsize} bytes) "
                f"but gives the byte range [{begin}, {end})",
                hint="the header lies about sizes",
            )
        if end > data_len:
            raise CorruptCheckpointError(
                path,
                f"tensor {name} needs bytes up to {end} of the data but the file holds {data_len}",
                hint="truncated?",
            )
        storage = Storage(buffer, data_start + begin, end - begin, key=name, file=path)
        rec = TensorRecord(name, info.name, shape, _contiguous_strides(shape), 0, storage)
        objects[name] = rec
        records.append(rec)
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
