"""Several runs in one file, told by their step keys: a script started again after a change of code (or
another script appending to the same file) writes records of its own shape, counted by a step key of its
own (``iter 99 loss …``, then ``Epoch [1/20] Step [10/100] Loss: …``). Read as one table, one of the keys
becomes the axis and every row of the other run piles up on a single step of it. Where the rows carrying
one step key all come before the first row carrying another (their stretches of the file do not overlap)
and each stretch holds enough rows, each stretch is a run of its own. Step keys whose rows interleave (an
eval line's ``validation loss at iteration`` between train lines' ``iteration``) are one run's.
"""

from __future__ import annotations

import numpy as np

from trainprobe.metrics.splits import is_step_key
from trainprobe.metrics.table import INTERNAL, Table, is_absent

# a stretch with fewer rows than this is a stray line (a summary, a config echo), not a run
_MIN_ROWS = 10


def run_segments(table: Table) -> list[int] | None:
    """Row indices where a new run begins (after the first), or None when the table is one run."""
    spans: list[tuple[int, int]] = []
    for key, col in table.columns.items():
        if key.startswith(INTERNAL) or not is_step_key(key):
            continue
        rows = np.flatnonzero(~is_absent(col))
        if rows.size >= _MIN_ROWS:
            spans.append((int(rows[0]), int(rows[-1])))
    if len(spans) < 2:
        return None
    spans.sort()
    starts: list[int] = []
    end = spans[0][1]
    for first, last in spans[1:]:
        if first > end:  # this key's rows all come after every row of the keys before it
            starts.append(first)
        end = max(end, last)
    return starts or None


__all__ = ["run_segments"]
