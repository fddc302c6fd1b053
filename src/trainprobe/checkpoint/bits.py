"""Which bit patterns are NaN, +Inf and −Inf in every floating dtype a checkpoint holds, counted over a block
of elements, and the values of the float8 formats (numpy has neither bfloat16 nor float8: their tensors are
read as their raw bits, uint16 and uint8).

Per-dtype rules:
- float64/32/16: IEEE 754.
- bfloat16: IEEE-like; exponent bits 0x7F80 all set is Inf (mantissa 0) or NaN.
- float8_e5m2: IEEE-like; 0x7C/0xFC are ±Inf, exponent all ones with a mantissa is NaN.
- float8_e4m3fn: no Inf; only S.1111.111 (0x7F, 0xFF) is NaN.
- float8_e4m3fnuz, float8_e5m2fnuz: no Inf, no −0; only 0x80 is NaN.
- float8_e8m0fnu: an exponent only; 0xFF is NaN.
Stdlib + numpy only."""

from __future__ import annotations

from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

# Masks over the raw bits of the dtypes numpy lacks: (value & exp_mask) == exp_mask marks "not finite", then
# NaN/+Inf/−Inf are told apart by exact patterns.
_BITS: dict[str, tuple[int, int, int | None, int | None]] = {
    # dtype: (exp_mask, sign_mask, +inf pattern, -inf pattern)
    "bfloat16": (0x7F80, 0x8000, 0x7F80, 0xFF80),
    "float8_e5m2": (0x7C, 0x80, 0x7C, 0xFC),
    "float8_e4m3fn": (0x7F, 0x80, None, None),
}
_SINGLE_NAN: dict[str, int] = {"float8_e4m3fnuz": 0x80, "float8_e5m2fnuz": 0x80, "float8_e8m0fnu": 0xFF}


def bad_mask(dtype: str, block: Array) -> Array:
    if dtype in _SINGLE_NAN:
        mask: Array = block == _SINGLE_NAN[dtype]
        return mask
    if dtype in _BITS:
        exp = _BITS[dtype][0]
        bits: Array = (block & exp) == exp
        return bits
    finite: Array = np.isfinite(block)
    return ~finite


def all_finite(dtype: str, block: Array) -> bool:
    if dtype in _SINGLE_NAN:
        return not bool((block == _SINGLE_NAN[dtype]).any())
    if dtype in _BITS:
        exp = _BITS[dtype][0]
        return not bool(((block & exp) == exp).any())
    if block.dtype.kind == "f" and block.dtype.itemsize >= 4 and block.dtype.isnative and block.ndim == 1:
        return _extremes_finite(block)
    return bool(np.isfinite(block).all())


#: Elements per look at a block's extremes: the second pass finds them in the core's own cache.
_EXTREMES_ELEMS = 1 << 18


def _extremes_finite(block: Array) -> bool:
    """Whether a float32/float64 block is finite, from its largest and smallest values: ``maximum`` keeps a
    NaN and +Inf, ``minimum`` a NaN and −Inf, and neither writes a mask (``isfinite`` writes one per
    element): in numpy's vector loops both together take about two thirds of ``isfinite(...).all()``."""
    for start in range(0, block.size, _EXTREMES_ELEMS):
        part = block[start : start + _EXTREMES_ELEMS]
        if not (np.isfinite(np.maximum.reduce(part)) and np.isfinite(np.minimum.reduce(part))):
            return False
    return True


def classify(dtype: str, block: Array) -> tuple[int, int, int]:
    if dtype in _SINGLE_NAN:
        return int(np.count_nonzero(block == _SINGLE_NAN[dtype])), 0, 0
    if dtype in _BITS:
        exp, _sign, pinf, ninf = _BITS[dtype]
        bad = (block & exp) == exp
        n_bad = int(np.count_nonzero(bad))
        if pinf is None or ninf is None:
            return n_bad, 0, 0
        p = int(np.count_nonzero(block == pinf))
        n = int(np.count_nonzero(block == ninf))
        return n_bad - p - n, p, n
    return (
        int(np.count_nonzero(np.isnan(block))),
        int(np.count_nonzero(np.isposinf(block))),
        int(np.count_nonzero(np.isneginf(block))),
    )


def _f8_table(exp_bits: int, man_bits: int, bias: int, kind: str) -> Array:
    """float32 values of all 256 bit patterns of a float8 format (NaN where the format has NaN/Inf
    patterns)."""
    codes = np.arange(256, dtype=np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> man_bits) & ((1 << exp_bits) - 1)
    man = codes & ((1 << man_bits) - 1)
    normal = (1 + man / (1 << man_bits)) * np.exp2(exp - bias)
    sub = (man / (1 << man_bits)) * np.exp2(1 - bias)
    values = sign * np.where(exp == 0, sub, normal)
    if kind == "fn":
        values[(codes & 0x7F) == 0x7F] = np.nan
    elif kind == "ieee":
        values[exp == (1 << exp_bits) - 1] = np.nan
    elif kind == "fnuz":
        values[codes == 0x80] = np.nan
    table: Array = values.astype(np.float32)
    return table


_F8_TABLES: dict[str, Array] = {}


def f8_lookup(dtype: str) -> Array:
    """float32 values of the 256 bit patterns of float8 format ``dtype`` (NaN for its NaN patterns)."""
    if dtype not in _F8_TABLES:
        if dtype == "float8_e4m3fn":
            table = _f8_table(4, 3, 7, "fn")
        elif dtype == "float8_e5m2":
            table = _f8_table(5, 2, 15, "ieee")
        elif dtype == "float8_e4m3fnuz":
            table = _f8_table(4, 3, 8, "fnuz")
        elif dtype == "float8_e5m2fnuz":
            table = _f8_table(5, 2, 16, "fnuz")
        else:  # float8_e8m0fnu: 2**(code-127), 0xFF NaN
            table = np.exp2(np.arange(256, dtype=np.float64) - 127).astype(np.float32)
            table[255] = np.nan
        _F8_TABLES[dtype] = table
    return _F8_TABLES[dtype]
