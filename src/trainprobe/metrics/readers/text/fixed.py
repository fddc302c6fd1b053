"""Lines of one template and one length, read as a byte matrix: every byte checked, numbers from digits.

Loggers print with fixed formats (``%.4f``, ``%8d``, ``%.6E``, ``%(asctime)s``), so lines of a template that
have the same length nearly always have every piece and every digit at the same column. Such a group of lines
is a 2-D ``uint8`` array; each column outside the numbers must hold the prototype's byte, each number column a
digit, a padding space or a sign in the right order, and each number is its digits' integer times a power of
ten: one multiply-add per digit column over all the lines, no text parsing at all. The integer is exact and
one division or multiplication by an exact power of ten rounds it once, so the value is the correctly rounded
one ``float()`` gives (mantissas under 2**53, exponents within ±22; anything else is left to the text parser).
A group that fails any check is left to the text parser too.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from trainprobe.metrics.readers.text.clock import StampLayout

_POW10 = 10.0 ** np.arange(23)
_DIGIT0, _DIGIT9, _SPACE, _MINUS, _PLUS, _DOT = 48, 57, 32, 45, 43, 46
_E = (69, 101)


def slot_spans(line: bytes, pieces: tuple[bytes, ...], start: int) -> list[tuple[int, int]] | None:
    """Byte spans of the numbers of ``line``: the gaps between its literal pieces (found in order from
    ``start``), each gap one number with its padding; None if a gap is empty or holds more than one."""
    spans: list[tuple[int, int]] = []
    pos = start
    for piece in pieces:
        at = line.find(piece, pos)
        if at < 0:
            return None
        if at > pos:
            gap = line[pos:at]
            if gap.strip() and len(gap.split()) != 1:
                return None
            if gap.strip():
                spans.append((pos, pos + len(gap.rstrip())))  # padding before the number, never after
        pos = at + len(piece)
    tail = line[pos:]
    if tail.strip():
        if len(tail.split()) != 1:
            return None
        spans.append((pos, pos + len(tail.rstrip())))
    return spans


def _integer(cols: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Value and sign of right-aligned integers, one per column of ``cols`` (digit positions × lines, uint8):
    padding spaces, then at most one sign, then digits."""
    nonspace = cols != _SPACE
    if not (nonspace[1:] >= nonspace[:-1]).all():
        return None  # a space after the number started
    digit = cols - np.uint8(_DIGIT0)  # wraps around below '0': spaces and signs come out ≥ 10
    is_digit = digit < 10
    is_sign = nonspace & ~is_digit
    if (is_sign[1:] & nonspace[:-1]).any() or not is_digit[-1].all():
        return None  # a sign that is not the first character, or no digit last
    signed = bool(is_sign.any())
    if signed and not ((cols == _MINUS) | (cols == _PLUS) | ~is_sign).all():
        return None  # something other than a sign before the digits
    digit[~is_digit] = 0
    # digit by digit (a matrix product would start a threaded BLAS for a few adds per line)
    value = digit[0].astype(np.float64)
    for row in digit[1:]:
        value *= 10.0
        value += row
    negative = (cols == _MINUS).any(axis=0) if signed else np.zeros(cols.shape[1], dtype=bool)
    return value, negative


def _number_column(cols: np.ndarray, proto: bytes) -> np.ndarray | None:
    """Values of one number slot: ``cols`` (slot width × lines, contiguous) and the prototype's bytes."""
    width = len(proto)
    e_at = next((i for i, c in enumerate(proto) if c in _E), width)
    dot_at = proto.find(b".", 0, e_at)
    if dot_at >= 0 and not (cols[dot_at] == _DOT).all():
        return None
    mant = [i for i in range(e_at) if i != dot_at]
    if len(mant) > 15:
        return None  # more digits than a float64 holds exactly
    got = _integer(cols[mant] if dot_at >= 0 else cols[:e_at])
    if got is None:
        return None
    value, negative = got
    k = -(e_at - dot_at - 1) if dot_at >= 0 else 0
    if e_at < width:
        if not np.isin(cols[e_at], _E).all() or e_at + 1 >= width:
            return None
        exp = _integer(cols[e_at + 1 :])
        if exp is None:
            return None
        exponent = np.where(exp[1], -exp[0], exp[0]).astype(np.int64) + k
        if (np.abs(exponent) > 22).any():
            return None
        out = np.where(
            exponent >= 0, value * _POW10[np.clip(exponent, 0, 22)], value / _POW10[np.clip(-exponent, 0, 22)]
        )
    elif k:
        out = value / _POW10[-k]
    else:
        out = value
    return np.asarray(np.where(negative, -out, out), dtype=np.float64)


def runs_of_one_length(lengths: np.ndarray, min_run: int) -> list[tuple[int, int]]:
    """(first line, line count) of runs of consecutive lines of one length, at least ``min_run`` long."""
    cuts = np.flatnonzero(np.diff(lengths) != 0) + 1
    bounds = np.concatenate(([0], cuts, [lengths.size]))
    return [(int(a), int(b - a)) for a, b in itertools.pairwise(bounds.tolist()) if b - a >= min_run]


def _column_diff(flat: np.ndarray, lines: int, length: int, row_bytes: int) -> np.ndarray:
    """Per column of the lines (``row_bytes`` apart in ``flat``): the OR over all lines of (byte xor the
    first line's byte); zero where every line has the first line's byte. One xor of the rows against the
    first, one reduction down them."""
    first = flat[:length]
    full = (lines - 1) * row_bytes  # the last line may lack its newline: it is compared on its own
    diff = np.bitwise_xor(flat[full : full + length], first)
    if lines > 1:
        rows = flat[:full].reshape(lines - 1, row_bytes)[:, :length]
        diff |= np.bitwise_or.reduce(rows ^ first, axis=0)
    return np.asarray(diff, dtype=np.uint8)


def read_fixed(
    flat: np.ndarray,
    lines: int,
    length: int,
    row_bytes: int,
    pieces: tuple[bytes, ...],
    stamp: StampLayout | None,
    stamp_offset: int,
    n_slots: int,
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(values (lines × n_slots), stamp seconds) of ``lines`` lines of ``length`` bytes, ``row_bytes`` apart
    in ``flat`` (a contiguous uint8 buffer: a run of the text, or rows gathered into one), or None."""
    flat = np.ascontiguousarray(flat[: (lines - 1) * row_bytes + length])
    block = as_strided(flat, shape=(lines, length), strides=(row_bytes, 1), writeable=False)
    proto = block[0].tobytes()
    after_stamp = stamp_offset + stamp.width if stamp is not None else 0
    spans = slot_spans(proto, pieces, after_stamp)
    if spans is None or len(spans) != n_slots:
        return None
    literal = np.ones(length, dtype=bool)
    for a, b in spans:
        literal[a:b] = False
    walls: np.ndarray | None = None
    if stamp is not None:
        literal[stamp_offset:after_stamp] = False
        walls = stamp.decode(block[:, stamp_offset:after_stamp])
        if walls is None:
            return None
    diff = _column_diff(flat, lines, length, row_bytes)
    if diff[literal].any():
        return None  # some line has another byte where the prototype has a literal one
    values = np.empty((lines, n_slots))
    for j, (a, b) in enumerate(spans):
        varies = diff[a:b] != 0
        if not varies.any():
            # the same bytes on every line (``global batch size: 96``, ``loss scale: 2048.0``): read once
            one = _number_column(np.frombuffer(proto[a:b], np.uint8)[:, None], proto[a:b])
            if one is None:
                return None
            values[:, j] = one[0]
            continue
        lead = 0  # padding that is blank on every line needs no reading
        while not varies[lead] and proto[a + lead] == _SPACE:
            lead += 1
        # copied row by row first, then turned: twice as fast as turning the strided view at once
        cols = np.ascontiguousarray(np.ascontiguousarray(block[:, a + lead : b]).T)
        col = _number_column(cols, proto[a + lead : b])
        if col is None:
            return None
        values[:, j] = col
    return values, walls


__all__ = ["read_fixed", "runs_of_one_length", "slot_spans"]
