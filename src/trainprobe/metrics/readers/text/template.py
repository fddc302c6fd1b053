"""Line templates: the shape of a metric line with its numbers taken out, and reading many lines of one shape
at once.

As Drain (He et al., 2017) groups log lines into templates whose variable tokens are masked, a metric line
read once by the tokenizer becomes a template: its literal pieces (keys, separators, units, the logger
prefix) and one slot per number, each slot the field it fills or none. Lines of that shape need no tokenizing:
in a block of lines that all hold the template's pieces the right number of times, the pieces are blanked out
and numpy's C parser reads the numbers that remain; a marker number at the end of every line checks that each
line gave exactly one value per slot. A fixed-width timestamp at a fixed offset is decoded as a column
(:class:`~trainprobe.metrics.readers.text.clock.StampLayout`). Spaces around pieces are free (Megatron pads
its numbers), so the pieces are matched without them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from trainprobe.metrics.readers.text.clock import Stamp, StampLayout
from trainprobe.metrics.readers.text.fixed import read_fixed, runs_of_one_length
from trainprobe.metrics.table import WALL_KEY

# Appended to every line before parsing; a line with one number too many or too few moves it off its column.
# Short, so it costs little to parse (a huge exponent took as long as the numbers of a line).
_MARKER = -7.0
_MARKER_TEXT = b" -7\n"
_MIN_GROUP = 16
_MAX_RUNS = 32
# Pieces made only of characters a number may contain could hide inside a number: no fast path for them.
_NUMBER_CHARS = frozenset(b"0123456789.eE+-")


@dataclass(frozen=True)
class Template:
    """One line shape. ``keys[i]`` is the column slot ``i`` fills (None: read and dropped)."""

    pieces: tuple[bytes, ...]  # the literal text after the stamp, in order (spaces trimmed, none empty)
    keys: tuple[str | None, ...]
    stamp: StampLayout | None = None
    stamp_offset: int = 0
    head: bytes = b""  # literal text before the stamp (``[`` of ``[2026-…]``)

    @property
    def literals(self) -> tuple[bytes, ...]:
        return (self.head, *self.pieces) if self.head else self.pieces

    @property
    def anchor(self) -> bytes:
        """The longest piece: a line without it is not of this shape."""
        return max(self.literals, key=len)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(k for k in self.keys if k is not None)

    def fits_fast_path(self) -> bool:
        return bool(self.literals) and all(not set(p) <= _NUMBER_CHARS for p in self.literals)

    def reads_as(self, line: bytes, names: dict[str, float]) -> bool:
        """Whether the template reads its own ``line`` as the tokenizer did (``names``; else it is not
        used). The wall clock is not compared: the tokenizer keeps it apart."""
        got = self.read_block(line, 1)
        if got is None:
            return False
        for key, value in zip(self.columns, got[0][0], strict=True):
            want = names.get(key)
            if key == WALL_KEY:
                continue
            if want is None or not (value == want or (value != value and want != want)):
                return False
        return True

    def read_block(self, text: bytes, n_lines: int | None) -> tuple[np.ndarray, np.ndarray | None] | None:
        """Values (n_lines, len(columns)) and wall clock of ``n_lines`` lines joined by ``\\n``, or None when
        some line is not of this shape (the caller then reads lines one by one). Groups of lines of one
        length are read as byte matrices (:mod:`.fixed`), the rest by blanking the pieces and parsing the
        numbers that remain."""
        arr = np.frombuffer(text, dtype=np.uint8)
        first = text.find(b"\n")
        if first > 0 and (arr.size + 1) % (first + 1) == 0 and (arr[first :: first + 1] == 10).all():
            # every line as long as the first (the newline every first+1 bytes): one run, no scan for
            # newlines; a newline anywhere else sits where the prototype has no newline and fails the check
            m = (arr.size + 1) // (first + 1)
            if n_lines is None or n_lines == m:
                got = read_fixed(
                    arr, m, first, first + 1, self.pieces, self.stamp, self.stamp_offset, len(self.keys)
                )
                if got is not None:
                    keep = [i for i, key in enumerate(self.keys) if key is not None]
                    return np.ascontiguousarray(got[0][:, keep]), got[1]
        breaks = np.flatnonzero(arr == 10)
        if n_lines is None:
            n_lines = int(breaks.size) + 1
        elif breaks.size != n_lines - 1:
            return None
        starts = np.concatenate(([0], breaks + 1))
        lengths = np.concatenate((breaks, [arr.size])) - starts
        k = len(self.keys)
        values = np.empty((n_lines, k))
        walls = np.full(n_lines, np.nan) if self.stamp is not None else None
        done = np.zeros(n_lines, dtype=bool)
        # runs of consecutive lines of one length are strided views of the text (no copy); lines of lengths
        # that alternate are gathered, one length at a time
        groups: list[tuple[np.ndarray, np.ndarray, int, int]] = []  # rows, buffer, length, row bytes
        runs = runs_of_one_length(lengths, _MIN_GROUP)
        if len(runs) > _MAX_RUNS:
            runs = []  # lengths that change every few lines: fewer, larger groups by gathering each length
        for first, count in runs:
            length = int(lengths[first])
            groups.append((np.arange(first, first + count), arr[int(starts[first]) :], length, length + 1))
        left = np.ones(n_lines, dtype=bool)
        for rows, _buf, _length, _row in groups:
            left[rows] = False
        if left.sum() >= _MIN_GROUP:
            idx = np.flatnonzero(left)
            lens, inverse, counts = np.unique(lengths[idx], return_inverse=True, return_counts=True)
            order = idx[np.argsort(inverse, kind="stable")]
            bounds = np.concatenate(([0], np.cumsum(counts)))
            for g in np.flatnonzero(counts >= _MIN_GROUP):
                rows = order[bounds[g] : bounds[g + 1]]
                length = int(lens[g])
                # rows of a sliding window over the text: a copy of the lines, no index matrix
                gathered = sliding_window_view(arr, length)[starts[rows]].reshape(-1)
                groups.append((rows, gathered, length, length))
        while groups:
            rows, buf, length, row_bytes = groups.pop()
            got = read_fixed(buf, rows.size, length, row_bytes, self.pieces, self.stamp, self.stamp_offset, k)
            if got is not None:
                values[rows] = got[0]
                if walls is not None and got[1] is not None:
                    walls[rows] = got[1]
                done[rows] = True
            elif row_bytes == length and rows.size >= 2 * _MIN_GROUP:
                groups.extend(_by_layout(rows, buf.reshape(rows.size, length)))
        rest = np.flatnonzero(~done)
        if rest.size:
            if rest.size == n_lines:
                part = text
            else:
                part = b"\n".join(text[int(starts[i]) : int(starts[i] + lengths[i])] for i in rest)
            got_rest = self._blank_and_parse(part, int(rest.size))
            if got_rest is None:
                return None
            values[rest] = got_rest[0]
            if walls is not None and got_rest[1] is not None:
                walls[rest] = got_rest[1]
        keep = [i for i, key in enumerate(self.keys) if key is not None]
        return np.ascontiguousarray(values[:, keep]), walls

    def _blank_and_parse(self, text: bytes, n_lines: int) -> tuple[np.ndarray, np.ndarray | None] | None:
        walls: np.ndarray | None = None
        if self.stamp is not None:
            got = self._stamps(text, n_lines)
            if got is None:
                return None
            walls, text = got
        literals = self.literals
        for piece in set(literals):
            if text.count(piece) != n_lines * sum(p.count(piece) for p in literals):
                return None
        for piece in sorted(set(literals), key=len, reverse=True):
            text = text.replace(piece, b" ")
        text = text.replace(b"\n", _MARKER_TEXT) + _MARKER_TEXT
        k = len(self.keys)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                flat = np.fromstring(text, dtype=np.float64, sep=" ")
        except (ValueError, DeprecationWarning):
            return None
        if flat.size != n_lines * (k + 1):
            return None
        table = flat.reshape(n_lines, k + 1)
        if not (table[:, k] == _MARKER).all():
            return None
        return table[:, :k], walls

    def _stamps(self, text: bytes, n_lines: int) -> tuple[np.ndarray, bytes] | None:
        stamp = self.stamp
        assert stamp is not None
        arr = np.frombuffer(text, dtype=np.uint8)
        breaks = np.flatnonzero(arr == 10)
        if breaks.size != n_lines - 1:
            return None
        starts = np.concatenate(([0], breaks + 1))
        ends = np.concatenate((breaks, [arr.size]))
        first, width = self.stamp_offset, stamp.width
        if (ends - starts < first + width).any():
            return None
        where = starts[:, None] + first + np.arange(width)
        seconds = stamp.decode(arr[where])
        if seconds is None:
            return None
        blanked = arr.copy()
        blanked[where] = 32
        return seconds, blanked.tobytes()


def _by_layout(rows: np.ndarray, block: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, int, int]]:
    """Lines of one length split by where their digits are (``[64/60000 (0%)]`` and ``[128/60000 (1%)]``
    are as long, but laid out apart), each layout a group of its own."""
    digits = np.packbits((block >= 48) & (block <= 57), axis=1)
    keys = np.ascontiguousarray(digits).view(np.dtype((np.void, digits.shape[1]))).ravel()
    _uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    if counts.size < 2:
        return []
    out = []
    for g in np.flatnonzero(counts >= _MIN_GROUP):
        pick = np.flatnonzero(inverse == g)
        out.append(
            (rows[pick], np.ascontiguousarray(block[pick]).reshape(-1), block.shape[1], block.shape[1])
        )
    return out


def learn_template(
    line: bytes, slots: list[tuple[int, int, str | None]], *, stamp: StampLayout | None, stamp_at: int
) -> Template | None:
    """A template from one line read by the tokenizer: ``slots`` are the (start, end, key) byte spans of its
    numbers, after the stamp (which spans ``stamp_at``…``stamp_at + width``)."""
    head = line[:stamp_at].strip(b" \t") if stamp is not None else b""
    pieces: list[bytes] = []
    pos = stamp_at + (stamp.width if stamp is not None else 0)
    for start, end, _key in slots:
        if start < pos:
            return None
        pieces.append(line[pos:start])
        pos = end
    pieces.append(line[pos:])
    literal = tuple(p for p in (piece.strip(b" \t\r") for piece in pieces) if p)
    made = Template(literal, tuple(k for _s, _e, k in slots), stamp, stamp_at, head)
    return made if made.fits_fast_path() and any(made.keys) else None


def template_of_line(
    line: bytes, text: str, slots: list[tuple[int, int, str | None]], stamp: object
) -> Template | None:
    """The template of a metric line read one by one: ``slots`` are its numbers' offsets in the line, each
    with its column; a timestamp is learnt as a layout (an epoch stamp is one more slot, the wall clock)."""
    layout: StampLayout | None = None
    stamp_at = 0
    if isinstance(stamp, Stamp):
        if stamp.kind == "epoch":
            slots.insert(0, (stamp.start, stamp.end, WALL_KEY))
        else:
            layout = StampLayout.learn(stamp.kind, text[stamp.start : stamp.end])
            if layout is None:
                return None
            stamp_at = stamp.start
    return learn_template(line, slots, stamp=layout, stamp_at=stamp_at)


__all__ = ["Template", "learn_template", "template_of_line"]
