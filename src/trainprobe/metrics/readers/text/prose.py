"""Which lines of a chunk are prose, found for the whole chunk at once: no digit, none of the words an
event or an eval banner needs (:data:`.rows.MAY_MATTER_WORDS`), and no line with a digit close enough below
to be a row under it were it a table header. Such a line can give nothing, so the parser counts it as
skipped without decoding or tokenizing it: prose costs about what a metric line read in bulk costs, not the
tenfold of a line read field by field.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from trainprobe.metrics.readers.text.columns import HEADER_REACH
from trainprobe.metrics.readers.text.rows import MAY_MATTER_WORDS

_NEWLINE = 10


def _line_spans(data: np.ndarray, n_lines: int) -> tuple[np.ndarray, np.ndarray] | None:
    ends = np.flatnonzero(data == _NEWLINE)
    if ends.size != n_lines - 1:
        return None
    return np.concatenate(([0], ends + 1)), np.concatenate((ends, [data.size]))


def prose_lines(chunk: bytes, lines: list[bytes]) -> np.ndarray:
    """Per line of ``chunk`` (``lines``, the chunk split at ``\n``): whether it is prose."""
    n = len(lines)
    spans = _line_spans(np.frombuffer(chunk, dtype=np.uint8), n)
    if spans is None:  # not the lines it was said to hold: nothing is taken for prose
        return np.zeros(n, dtype=bool)
    starts, _stops = spans
    data = np.frombuffer(chunk, dtype=np.uint8)
    has_digit = np.zeros(n, dtype=bool)
    if data.size:
        # (per line at once, in a byte per byte of the chunk: no wider temporary)
        inside = starts < data.size  # a last empty line starts past the end
        has_digit[inside] = np.logical_or.reduceat((data >= 48) & (data <= 57), starts[inside])
        has_digit &= starts != _stops  # an empty line's segment is its newline's
    # the words are looked for in the lines without a digit only (in a metric log: a few)
    bare = np.flatnonzero(~has_digit)
    prose = np.zeros(n, dtype=bool)
    if bare.size:
        text = b"\n".join([lines[i] for i in bare.tolist()]).lower()
        bare_starts = [0, *(np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == _NEWLINE) + 1).tolist()]
        said = np.zeros(bare.size, dtype=bool)
        for word in MAY_MATTER_WORDS:
            at = text.find(word)
            while at != -1:
                line = bisect_right(bare_starts, at) - 1
                said[line] = True
                # the rest of this line is decided: look on from the next one
                at = text.find(word, bare_starts[line + 1]) if line + 1 < len(bare_starts) else -1
        prose[bare[~said]] = True
    # a header is read for the rows under it: a line with a digit in the next HEADER_REACH lines (or past
    # the chunk's end, not seen here) keeps its line-by-line reading
    below = np.concatenate(([0], np.cumsum(has_digit, dtype=np.int64)))
    idx = np.arange(n)
    reach = np.minimum(idx + 1 + HEADER_REACH, n)
    header_room = (below[reach] - below[idx + 1] > 0) | (idx + 1 + HEADER_REACH > n)
    return prose & ~header_room


class ProseIndex:
    """Which lines of a chunk are prose, worked out a window of lines at a time as they are asked about: the
    parser stops asking once it has learnt a template and reads the rest of the chunk in bulk."""

    WINDOW = 4096

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines
        self._windows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _window(self, i: int) -> tuple[int, np.ndarray, np.ndarray]:
        at = i // self.WINDOW
        got = self._windows.get(at)
        if got is None:
            part = self._lines[at * self.WINDOW : (at + 1) * self.WINDOW]
            prose = prose_lines(b"\n".join(part), part)
            # per line: the first line at or after it that is not prose (the window's end: none)
            after = np.where(prose, prose.shape[0], np.arange(prose.shape[0]))
            got = (prose, np.minimum.accumulate(after[::-1])[::-1])
            self._windows[at] = got
        return at * self.WINDOW, got[0], got[1]

    def is_prose(self, i: int) -> bool:
        start, prose, _ = self._window(i)
        return bool(prose[i - start])

    def prose_until(self, i: int) -> int:
        """The first line after ``i`` that is not prose (or the end of ``i``'s window)."""
        start, _, after = self._window(i)
        return start + int(after[i - start])


__all__ = ["ProseIndex", "prose_lines"]
