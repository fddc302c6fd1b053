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

from trainprobe.metrics.readers.text.clock import StampLayout

# Appended to every line before parsing; a line with one number too many or too few moves it off its column.
_MARKER = 7.25e300
_MARKER_TEXT = b" 7.25e300\n"
# Pieces made only of characters a number may contain could hide inside a number: no fast path for them.
_NUMBER_CHARS = frozenset(b"0123456789.eE+-")


@dataclass(frozen=True)
class Template:
    """One line shape. ``keys[i]`` is the column slot ``i`` fills (None: read and dropped)."""

    pieces: tuple[bytes, ...]  # the literal text around the slots, in order (spaces trimmed, none empty)
    keys: tuple[str | None, ...]
    stamp: StampLayout | None = None
    stamp_offset: int = 0

    @property
    def anchor(self) -> bytes:
        """The longest piece: a line without it is not of this shape."""
        return max(self.pieces, key=len)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(k for k in self.keys if k is not None)

    def fits_fast_path(self) -> bool:
        return bool(self.pieces) and all(not set(p) <= _NUMBER_CHARS for p in self.pieces)

    def read_block(self, text: bytes, n_lines: int) -> tuple[np.ndarray, np.ndarray | None] | None:
        """Values (n_lines, len(columns)) and wall clock of ``n_lines`` lines joined by ``\\n``, or None when
        some line is not of this shape (the caller then reads lines one by one)."""
        walls: np.ndarray | None = None
        if self.stamp is not None:
            got = self._stamps(text, n_lines)
            if got is None:
                return None
            walls, text = got
        for piece in set(self.pieces):
            if text.count(piece) != n_lines * self._per_line(piece):
                return None
        for piece in sorted(set(self.pieces), key=len, reverse=True):
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
        if not (table[:, k] == _MARKER).all() or np.count_nonzero(table[:, :k] == _MARKER):
            return None
        keep = [i for i, key in enumerate(self.keys) if key is not None]
        return np.ascontiguousarray(table[:, keep]), walls

    def _per_line(self, piece: bytes) -> int:
        # Occurrences of a piece in one line: in every piece (it may sit inside a longer one), counted apart.
        return sum(p.count(piece) for p in self.pieces)

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


def learn_template(
    line: bytes, slots: list[tuple[int, int, str | None]], *, stamp: StampLayout | None, stamp_at: int
) -> Template | None:
    """A template from one line read by the tokenizer: ``slots`` are the (start, end, key) byte spans of its
    numbers, after the stamp (which spans ``stamp_at``…``stamp_at + width``)."""
    pieces = [line[:stamp_at]] if stamp is not None else []
    pos = stamp_at + (stamp.width if stamp is not None else 0)
    for start, end, _key in slots:
        if start < pos:
            return None
        pieces.append(line[pos:start])
        pos = end
    pieces.append(line[pos:])
    literal = tuple(p for p in (piece.strip(b" \t\r") for piece in pieces) if p)
    made = Template(literal, tuple(k for _s, _e, k in slots), stamp, stamp_at)
    return made if made.fits_fast_path() and any(made.keys) else None


__all__ = ["Template", "learn_template"]
