"""Container checks ``check`` needs beyond what opening a file verifies: DCP chunk coverage.

A torch.distributed.checkpoint ``.metadata`` lists, per tensor, its global size and the chunks (offsets,
sizes) each rank wrote, and per chunk where its bytes live. A checkpoint saved while ranks disagreed, or
assembled from two saves, can miss a chunk or hold two that overlap; the reader would still open it. Here
every tensor's chunks must tile it exactly (inside the tensor, no overlap, volumes adding up), every chunk
must have a storage entry, and every data file must exist and be long enough. Read with trainprobe's safe
unpickler; stdlib + numpy only."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from typing import Any

from trainprobe.checkpoint.reading.formats.dcp import METADATA, overlapping_chunks
from trainprobe.checkpoint.reading.pickle.opaque import Opaque
from trainprobe.checkpoint.reading.pickle.unpickler import UNPICKLE_ERRORS, SafeUnpickler
from trainprobe.checkpoint.safe_io import read_side

_MAX_PROBLEMS = 50


def _fields(obj: Any) -> dict[str, Any]:
    return obj.fields() if isinstance(obj, Opaque) else {}


def _ints(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) for v in value):
        return tuple(value)
    return None


def _volume(sizes: tuple[int, ...]) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


def dcp_coverage_problems(
    path: str, *, metadata: bytes | None = None, sizes: Mapping[str, int] | None = None
) -> tuple[list[str], int] | None:
    """(problems, tensors checked) for a DCP directory; None when ``path`` is not one. ``metadata`` (the
    ``.metadata`` bytes) and ``sizes`` (data file name -> its size) when the directory is not here (a unit
    spread over machines: the sizes its holders listed)."""
    meta_path = os.path.join(path, METADATA)
    if metadata is None and not (os.path.isdir(path) and os.path.isfile(meta_path)):
        return None
    try:
        with io.BytesIO(metadata) if metadata is not None else io.BytesIO(read_side(meta_path)) as fh:
            meta = SafeUnpickler(fh, source=METADATA).load()
    except UNPICKLE_ERRORS as exc:
        return [f"{METADATA} cannot be unpickled safely ({exc})"], 0
    fields = _fields(meta)
    tensors = fields.get("state_dict_metadata")
    storage = fields.get("storage_data")
    if not isinstance(tensors, dict) or not isinstance(storage, dict):
        return [f"{METADATA} lacks state_dict_metadata or storage_data"], 0
    problems: list[str] = []
    stored: set[tuple[str, tuple[int, ...] | None]] = set()
    seen: dict[str, int] = {}
    for index, info in storage.items():
        idx, where = _fields(index), _fields(info)
        stored.add((str(idx.get("fqn")), _ints(idx.get("offset"))))
        rel, offset, length = where.get("relative_path"), where.get("offset"), where.get("length")
        if not isinstance(rel, str) or not isinstance(offset, int) or not isinstance(length, int):
            problems.append(f"malformed storage entry for {idx.get('fqn')}")
            continue
        if rel not in seen:
            if sizes is not None:
                seen[rel] = sizes.get(rel, -1)
            else:
                file = os.path.join(path, rel)
                seen[rel] = os.path.getsize(file) if os.path.isfile(file) else -1
            if seen[rel] < 0:
                problems.append(f"data file {rel} (holding {idx.get('fqn')}) is missing")
        if seen[rel] >= 0 and offset + length > seen[rel]:
            problems.append(f"{rel} is truncated: {idx.get('fqn')} needs bytes up to {offset + length}")
    checked = 0
    for fqn, tmeta in tensors.items():
        tf = _fields(tmeta)
        if "chunks" not in tf:
            continue  # bytes (pickled objects), one entry each
        size = _ints(tf.get("size"))
        chunks = []
        for chunk in tf.get("chunks") or []:
            cf = _fields(chunk)
            offsets, csizes = _ints(cf.get("offsets")), _ints(cf.get("sizes"))
            if size is None or offsets is None or csizes is None or len(offsets) != len(size) != len(csizes):
                problems.append(f"{fqn}: malformed chunk metadata")
                break
            chunks.append((offsets, csizes))
        else:
            if size is None:
                continue
            checked += 1
            problems.extend(_coverage(str(fqn), size, chunks, stored))
    return problems[:_MAX_PROBLEMS], checked


def _coverage(
    fqn: str,
    size: tuple[int, ...],
    chunks: list[tuple[tuple[int, ...], tuple[int, ...]]],
    stored: set[tuple[str, tuple[int, ...] | None]],
) -> list[str]:
    problems = []
    for offsets, csizes in chunks:
        if any(o < 0 or o + s > d for o, s, d in zip(offsets, csizes, size, strict=True)):
            problems.append(
                f"{fqn}: chunk at {list(offsets)} of size {list(csizes)} lies outside {list(size)}"
            )
        if (fqn, offsets) not in stored and (fqn, None) not in stored:
            problems.append(f"{fqn}: chunk at {list(offsets)} has no storage entry")
    pairs, complete = overlapping_chunks(chunks, limit=_MAX_PROBLEMS)
    problems.extend(f"{fqn}: chunks at {list(a[0])} and {list(b[0])} overlap" for a, b in pairs)
    if not complete:
        problems.append(
            f"{fqn}: {len(chunks):,} chunks stacked on every axis: their overlaps were not all checked"
        )
    covered = sum(_volume(s) for _o, s in chunks)
    if covered < _volume(size) and not any("overlap" in p for p in problems):
        problems.append(
            f"{fqn}: chunks cover {covered:,} of {_volume(size):,} elements — "
            "a hole (a rank's chunk is missing)"
        )
    return problems
