"""Counters of other loops: the ``M`` of an ``N/M`` counter says which loop it counts. A train loop's
``[16/5011]`` and the eval loop's progress bar ``20/20`` (or ``310/310``) between its epochs fill one column
(the run's counter), and read as one they put every evaluation at step 20 and make the train counter look
as if several writers took turns. The total most rows carry is the main loop's; where another total comes
back again and again between the main loop's rows, those rows count another loop, and their counter is no
step of the run (they take the step of the rows around them, as a line with no counter does). A total that
changes once (a run started again with another schedule) is the same loop counted anew, and stays.
"""

from __future__ import annotations

import numpy as np

from trainprobe.metrics.table import ABSENT, TOTAL_PREFIX, Table, is_absent

# another loop's rows come back at least this many times between the main loop's
_MIN_RETURNS = 2
_MIN_ROWS = 4


def forget_other_loops(table: Table) -> Table:
    """``table`` with the counter values of other loops' rows taken out (see the module)."""
    columns: dict[str, np.ndarray] | None = None
    for key in [k for k in table.columns if TOTAL_PREFIX + k in table.columns]:
        total_key = TOTAL_PREFIX + key
        totals = table.columns[total_key]
        rows = np.flatnonzero(~is_absent(totals) & ~is_absent(table.columns[key]))
        if rows.size < _MIN_ROWS:
            continue
        t = totals[rows]
        if float(t.min()) == float(t.max()):  # one loop (the usual log: no sort of a whole column)
            continue
        values, counts = np.unique(t, return_counts=True)
        other = t != values[np.argmax(counts)]
        if np.count_nonzero(other[1:] & ~other[:-1]) < _MIN_RETURNS:
            continue
        columns = dict(table.columns) if columns is None else columns
        for k in (key, total_key):
            col = columns[k].copy()
            col[rows[other]] = ABSENT
            columns[k] = col
    if columns is None:
        return table
    return Table(columns, table.wall, table.order, table.units)


__all__ = ["forget_other_loops"]
