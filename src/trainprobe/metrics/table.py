"""The columnar form every log reader produces: one ``RunLog`` per run, numpy arrays per metric.

Missing cells are NaN with ``present`` saying which cells a logger actually wrote, so a literal ``nan`` in
the log (a value) and a field the logger left out (Megatron hides NaN steps that way) stay distinguishable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from trainprobe.metrics.events import Event

FloatArray = np.ndarray

STEP_KEYS = frozenset(
    {
        "step",
        "_step",
        "global_step",
        "iter",
        "iteration",
        "s",
        "it",
        "trainer/global_step",
        "train/global_step",
        "steps",
        "global step",
        "optimizer_step",
    }
)
_STEP_LAST_WORDS = frozenset({"step", "iter", "iteration", "global_step"})
# Keys whose value is a wall clock or an elapsed time since start (both give gaps between rows).
TIME_KEYS = frozenset(
    {
        "time",
        "timestamp",
        "_timestamp",
        "wall_time",
        "walltime",
        "wall",
        "elapsed",
        "train_time",
        "_runtime",
        "runtime",
        "elapsed_time",
        "time_s",
        "wallclock",
    }
)


def is_step_key(key: str) -> bool:
    low = key.strip().lower()
    if low in STEP_KEYS:
        return True
    words = re.split(r"[\s/]+", low)
    return len(words) > 1 and words[-1] in _STEP_LAST_WORDS


@dataclass
class RunLog:
    """One run's metrics as columns. ``steps``/``wall`` have one entry per row; ``wall`` is seconds or
    None."""

    name: str
    path: str
    format: str
    steps: FloatArray
    columns: dict[str, FloatArray]
    present: dict[str, np.ndarray] = field(default_factory=dict)
    wall: FloatArray | None = None
    events: list[Event] = field(default_factory=list)
    skipped_lines: int = 0

    def __len__(self) -> int:
        return int(self.steps.shape[0])

    def mask(self, metric: str) -> np.ndarray:
        """Rows where ``metric`` was written (a literal NaN counts as written)."""
        got = self.present.get(metric)
        return got if got is not None else np.ones(len(self), dtype=bool)


class ColumnBuilder:
    """Collects rows (one at a time or in numpy blocks, in file order) and assembles a ``RunLog``."""

    def __init__(self) -> None:
        self._blocks: list[tuple[tuple[str, ...], np.ndarray]] = []
        self._rows: list[dict[str, float]] = []
        self.units: dict[str, str] = {}
        self.n_rows = 0

    def add_row(self, row: dict[str, float]) -> None:
        self._rows.append(row)
        self.n_rows += 1

    def add_block(self, keys: tuple[str, ...], values: np.ndarray) -> None:
        self._flush_rows()
        self._blocks.append((keys, values))
        self.n_rows += values.shape[0]

    def _flush_rows(self) -> None:
        if not self._rows:
            return
        keys: list[str] = []
        seen: set[str] = set()
        for row in self._rows:
            for k in row:
                if k not in seen:
                    seen.add(k)
                    keys.append(k)
        block = np.full((len(self._rows), len(keys)), np.nan)
        have = np.zeros((len(self._rows), len(keys)), dtype=bool)
        index = {k: j for j, k in enumerate(keys)}
        for i, row in enumerate(self._rows):
            for k, v in row.items():
                j = index[k]
                block[i, j] = v
                have[i, j] = True
        self._blocks.append((tuple(keys), np.where(have, block, ABSENT)))
        self._rows = []

    def columns(self) -> tuple[dict[str, FloatArray], dict[str, np.ndarray]]:
        """All columns, NaN-filled where absent, with a ``present`` mask for columns that have gaps."""
        self._flush_rows()
        keys: list[str] = []
        seen: set[str] = set()
        for bkeys, _ in self._blocks:
            for k in bkeys:
                if k not in seen:
                    seen.add(k)
                    keys.append(k)
        cols: dict[str, FloatArray] = {}
        present: dict[str, np.ndarray] = {}
        for key in keys:
            parts: list[np.ndarray] = []
            for bkeys, values in self._blocks:
                if key in bkeys:
                    parts.append(values[:, bkeys.index(key)])
                else:
                    parts.append(np.full(values.shape[0], ABSENT))
            col = np.concatenate(parts) if parts else np.empty(0)
            absent = _is_absent(col)
            if absent.any():
                present[key] = ~absent
                col = np.where(absent, np.nan, col)
            cols[key] = col
        return cols, present


# Absent cells travel through blocks as one particular NaN payload, so a literal NaN stays a value.
ABSENT = float(np.frombuffer(np.array([0x7FF8DEADBEEF0001], dtype=np.uint64).tobytes(), dtype=np.float64)[0])
_ABSENT_BITS = np.uint64(0x7FF8DEADBEEF0001)


def _is_absent(col: FloatArray) -> np.ndarray:
    return np.asarray(col.view(np.uint64) == _ABSENT_BITS)


def finish_run(
    builder: ColumnBuilder,
    *,
    name: str,
    path: str,
    fmt: str,
    wall: FloatArray | None = None,
    events: list[Event] | None = None,
    skipped_lines: int = 0,
) -> RunLog:
    """Split the step and time columns out of the collected rows and return the run."""
    cols, present = builder.columns()
    n = builder.n_rows
    step_key = next((k for k in cols if is_step_key(k)), None)
    if step_key is None:
        steps = np.arange(n, dtype=np.float64)
    else:
        steps = cols.pop(step_key)
        have = present.pop(step_key, None)
        if have is not None:
            steps = _forward_fill(steps, have)
        # Further step-like keys (e.g. "validation loss at iteration") fill the rows the main key left empty.
        for other in [k for k in cols if is_step_key(k)]:
            extra = cols.pop(other)
            extra_have = present.pop(other, np.ones(n, dtype=bool))
            if have is not None:
                fill = ~have & extra_have
                steps = np.where(fill, extra, steps)
    if wall is None or not np.isfinite(wall).any():
        wall = _wall_from_fields(cols, present, builder.units)
    for key in list(cols):
        if key.lower() in TIME_KEYS:
            cols.pop(key)
            present.pop(key, None)
    return RunLog(
        name=name,
        path=path,
        format=fmt,
        steps=steps,
        columns=cols,
        present=present,
        wall=wall,
        events=events or [],
        skipped_lines=skipped_lines,
    )


def _forward_fill(values: FloatArray, have: np.ndarray) -> FloatArray:
    """Rows without a step take the step of the last row that had one (0 before the first)."""
    idx = np.where(have, np.arange(values.shape[0]), 0)
    np.maximum.accumulate(idx, out=idx)
    out = np.asarray(values[idx], dtype=np.float64)
    first = int(np.argmax(have)) if have.any() else values.shape[0]
    out[:first] = 0.0
    return out


def _wall_from_fields(
    cols: dict[str, FloatArray], present: dict[str, np.ndarray], units: dict[str, str]
) -> FloatArray | None:
    for key in cols:
        if key.lower() in TIME_KEYS:
            col = cols[key]
            scale = {"ms": 1e-3, "us": 1e-6, "min": 60.0, "h": 3600.0}.get(units.get(key, ""), 1.0)
            have = present.get(key)
            out = col * scale
            if have is not None:
                out = np.where(have, out, np.nan)
            return np.asarray(out, dtype=np.float64)
    return None
