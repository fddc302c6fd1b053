"""The literal-split fast path for uniform log lines.

When every line of a multi-megabyte chunk has the same literal pieces (keys, separators, units) around its
numbers, blanking those pieces leaves only numbers, which numpy's C text parser (``np.loadtxt``) reads several
times faster than ``float()`` per token from a regex match.
"""

from __future__ import annotations

import io

import numpy as np


def split_uniform(chunk: str, pieces: list[str], n_values: int) -> np.ndarray | None:
    """Values of a chunk whose every line is ``pieces[0] v1 pieces[1] v2 ... pieces[-1]`` (literal pieces),
    as an (n_lines, n_values) array; None when the chunk is not uniform (then the caller parses line by line).

    Each literal piece must occur exactly once per line; they are blanked out and numpy's C text parser
    (``np.loadtxt``) reads the numbers that remain, at several times the speed of ``float()`` per token.
    """
    n_lines = chunk.count("\n") + 1
    checked = [p for p in pieces if p.strip()]
    if not checked or any(chunk.count(p) != n_lines for p in checked):
        return None
    text = chunk
    for piece in sorted(checked, key=len, reverse=True):
        text = text.replace(piece, " ")
    try:
        values = np.loadtxt(io.StringIO(text), dtype=np.float64, ndmin=2, comments=None)
    except ValueError:
        return None
    if values.shape != (n_lines, n_values):
        return None
    return values
