"""Master weights: where fp32 weights sit beside bf16/fp16 copies of the same tensor, the copy is their cast
(round to nearest even), bit for bit; a copy from another step is torn evidence."""

from __future__ import annotations

from typing import Any

import numpy as np

from trainprobe.checkpoint.check.state import MAX_NAMES
from trainprobe.checkpoint.evidence import Evidence
from trainprobe.checkpoint.numerics import ChunkReleaser, blocks
from trainprobe.checkpoint.reading.base import TensorRecord

_CHUNK_ELEMS = 1 << 20
_LOW_PRECISION = ("bfloat16", "float16")


def cast_fp32(dtype: str, arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """float32 -> bfloat16 bits (round to nearest even) or float16, as torch casts."""
    if dtype == "float16":
        return arr.astype(np.float16)
    bits = arr.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(arr)
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def check_master_weights(records: list[TensorRecord], ev: list[Evidence]) -> None:
    """Pair fp32 tensors with bf16/fp16 tensors of the same shape whose names end the same way, past the
    top-level key (``master.layers.0.weight`` / ``model.layers.0.weight``)."""
    by_suffix: dict[tuple[str, tuple[int, ...]], list[TensorRecord]] = {}
    for rec in records:
        if rec.dtype in ("float32", *_LOW_PRECISION) and "." in rec.name and rec.numel > 1:
            suffix = rec.name.split(".", 1)[1]
            by_suffix.setdefault((suffix, rec.shape), []).append(rec)
    pairs = []
    for group in by_suffix.values():
        fp32 = [r for r in group if r.dtype == "float32"]
        low = [r for r in group if r.dtype in _LOW_PRECISION]
        if len(fp32) == 1 and len(low) == 1:
            pairs.append((fp32[0], low[0]))
    if not pairs:
        return
    differ = []
    for master, copy_ in pairs:
        mismatched = 0
        master_arr, copy_arr = master.array(), copy_.array()
        master_free, copy_free = ChunkReleaser(master, master_arr), ChunkReleaser(copy_, copy_arr)
        for (start, mb), (_t, lb) in zip(
            blocks(master_arr, _CHUNK_ELEMS), blocks(copy_arr, _CHUNK_ELEMS), strict=True
        ):
            cast = cast_fp32(copy_.dtype, np.ascontiguousarray(mb))
            lb = np.ascontiguousarray(lb)
            same = cast.view(np.uint16) == lb.view(np.uint16)
            mismatched += int(np.count_nonzero(~same))
            master_free.done(start, mb.size)
            copy_free.done(start, lb.size)
        master_free.flush()
        copy_free.flush()
        if mismatched:
            differ.append(f"{copy_.name} != cast of {master.name} in {mismatched:,} element(s)")
    if differ:
        ev.append(
            Evidence(
                "master-weights",
                "fail",
                f"{len(differ)} of {len(pairs)} low-precision weight(s) are not the cast of their fp32 "
                f"master: {differ[0]} — they come from different steps",
                indicates="torn",
                tensors=differ[:MAX_NAMES],
            )
        )
    else:
        ev.append(
            Evidence(
                "master-weights",
                "pass",
                f"{len(pairs)} bf16/fp16 weight(s) equal the cast of their fp32 master copies",
                values={"decisive": True},
            )
        )
