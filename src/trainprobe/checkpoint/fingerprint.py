"""A per-tensor fingerprint, computed in the pass that counts NaN/Inf (no extra read): identical units.

A tensor whose bytes the container already checksums (a torch zip record's stored CRC32) is fingerprinted by
that CRC and the view's geometry: free. Any other tensor (safetensors, legacy files) gets the CRC32 of its
elements in C order, chunk by chunk as the NaN pass reads them: zlib-ng's CRC32 when installed (measured at
memory speed, about the cost of the NaN check itself), else the standard library's (the same values, a few
times slower), so a far machine with only numpy fingerprints exactly as this one does. A fingerprint is a
string; two tensors are identical (as far as a 32-bit CRC and the size can tell) when their fingerprints are
equal. Stdlib + numpy only.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from trainprobe.checkpoint.reading.base import TensorRecord
from trainprobe.checkpoint.reading.zipcheck import default_crc32


class Fingerprinter:
    """Feeds the blocks of one tensor, in order; ``digest()`` is its fingerprint."""

    def __init__(self) -> None:
        self._crc = 0
        self._bytes = 0

    def update(self, block: np.ndarray[Any, Any]) -> None:
        if block.size == 0:
            return
        if not block.flags.c_contiguous:
            block = np.ascontiguousarray(block)
        raw = block.reshape(-1).view(np.uint8)
        self._bytes += raw.size
        self._crc = default_crc32(raw, self._crc)

    def digest(self) -> str:
        return f"crc32:{self._crc:08x}:{self._bytes}"


def stored_fingerprint(record: TensorRecord) -> str | None:
    """The free fingerprint of a tensor whose container stores a CRC32 of its storage, else None."""
    crc = record.storage.crc32
    if crc is None:
        return None
    whole = record.storage_offset == 0 and record.nbytes == record.storage.nbytes and _contiguous(record)
    if whole:
        return f"crc32:{crc:08x}:{record.storage.nbytes}"
    return f"crc32:{crc:08x}:{record.storage.nbytes}@{record.storage_offset}:{record.shape}:{record.stride}"


def _contiguous(record: TensorRecord) -> bool:
    expected = 1
    for dim, stride in zip(reversed(record.shape), reversed(record.stride), strict=True):
        if dim != 1 and stride != expected:
            return False
        expected *= dim
    return True


def unit_fingerprint(items: Iterable[tuple[str, str | None]]) -> str | None:
    """One fingerprint for a set of (tensor name, fingerprint): None when any tensor has none."""
    digest = hashlib.sha256()
    count = 0
    for name, fp in sorted(items, key=lambda kv: kv[0]):
        if fp is None:
            return None
        digest.update(f"{name}\0{fp}\n".encode("utf-8", "surrogatepass"))
        count += 1
    return f"sha256:{digest.hexdigest()[:32]}" if count else None


def tensor_key(unit_path: str, part_path: str, name: str) -> str:
    """A tensor's name in its unit, as the unit fingerprint hashes it (``optimizer.pt:state.0.exp_avg``)."""
    rel = "" if part_path == unit_path else os.path.relpath(part_path, unit_path)
    return f"{rel}:{name}"


class Fingerprinted(Protocol):
    path: str
    fingerprint: str | None
    identical_to: list[str]


def mark_identical(units: Sequence[Fingerprinted]) -> None:
    """Units whose tensors have identical fingerprints name each other (two saves of the same state)."""
    by_fp: dict[str, list[Fingerprinted]] = {}
    for unit in units:
        if unit.fingerprint is not None:
            by_fp.setdefault(unit.fingerprint, []).append(unit)
    for group in by_fp.values():
        if len(group) > 1:
            for unit in group:
                unit.identical_to = [u.path for u in group if u is not unit]
