"""A per-tensor fingerprint, computed in the pass that counts NaN/Inf (no extra read): identical units.

A tensor whose bytes the container already checksums (a torch zip record's stored CRC32) is fingerprinted by
that CRC and the view's geometry: free. Any other tensor (safetensors, legacy files) gets the CRC32 of its
elements in C order, chunk by chunk as the NaN pass reads them: zlib-ng's CRC32 when installed (measured at
memory speed, about the cost of the NaN check itself), else the standard library's (the same values, a few
times slower), so a far machine with only numpy fingerprints exactly as this one does. A large tensor read
in pieces by several threads has each piece's CRC32 joined into the whole's (:func:`combine_crc32`): the
same fingerprint as one pass. A fingerprint is a string; two tensors are identical (as far as a 32-bit CRC
and the size can tell) when their fingerprints are equal. Stdlib + numpy only.
"""

from __future__ import annotations

import functools
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

    def state(self) -> tuple[int, int]:
        """(CRC32, bytes) so far: a piece's, for :func:`combine_crc32`."""
        return self._crc, self._bytes

    def digest(self) -> str:
        return crc_digest(self._crc, self._bytes)


def crc_digest(crc: int, nbytes: int) -> str:
    """The fingerprint of ``nbytes`` bytes whose CRC32 is ``crc``."""
    return f"crc32:{crc:08x}:{nbytes}"


def combine_crc32(pieces: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """(CRC32, bytes) of consecutive pieces given as their own (CRC32, bytes), in order: the CRC32 of their
    bytes one after the other, as one pass over them would compute it."""
    crc = total = 0
    for piece_crc, nbytes in pieces:
        crc = crc32_combine(crc, piece_crc, nbytes) if total else piece_crc
        total += nbytes
    return crc, total


# crc32_combine as zlib computes it (crc32.c, 1.2.12 on): the CRC of A+B is the CRC of A multiplied by x^(8
# len(B)) modulo the CRC polynomial, plus the CRC of B. zlib-ng's Python module has it, the standard
# library's zlib not, so a far machine with only numpy uses this (the same values): the operator of a
# length is computed once (every piece but a tensor's last has the same length), then one product each.
_POLY = 0xEDB88320


def _multmodp(a: int, b: int) -> int:
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if (a & (m - 1)) == 0:
                return p
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


@functools.cache
def _powers() -> list[int]:
    table = [1 << 30]  # x^1; entry k is x^(2^k) modulo the polynomial
    for _ in range(31):
        table.append(_multmodp(table[-1], table[-1]))
    return table


@functools.lru_cache(maxsize=64)
def _shift(nbytes: int) -> int:
    """x^(8 nbytes) modulo the polynomial."""
    p, n, k = 1 << 31, nbytes, 3  # x^0
    while n:
        if n & 1:
            p = _multmodp(_powers()[k & 31], p)
        n >>= 1
        k += 1
    return p


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC32 of A+B from A's CRC32 ``crc1``, B's ``crc2`` and B's length ``len2``."""
    return _multmodp(_shift(len2), crc1) ^ crc2


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
