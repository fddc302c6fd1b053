"""The columnar form every log reader produces: one ``RunLog`` per run, numpy arrays per metric.

Missing cells are NaN with ``present`` saying which cells a logger actually wrote, so a literal ``nan`` in
the log (a value) and a field the logger left out (Megatron hides NaN steps that way) stay distinguishable.
Readers hand rows (one at a time, or numpy blocks) to a ``ColumnBuilder``, each with an optional order key
(the line it came from), so blocks read by a template and rows read one by one interleave as in the file;
``trainprobe.metrics.axis.finish_run`` then builds the step axis and the wall clock.
"""

from __future__ import annotations

import base64
import math
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainprobe.metrics.coverage import Coverage
from trainprobe.metrics.events import Event

FloatArray = np.ndarray

# Column names a reader uses for what is not a metric (consumed by finish_run, never reported).
INTERNAL = "#"
WALL_KEY = "#wall"
TOTAL_PREFIX = "#total:"


@dataclass(frozen=True)
class Unread:
    """A line of a log that gave no metric row, and why (the first few are kept, to explain a log that
    gave none)."""

    line_no: int
    text: str
    why: str


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
    unread: list[Unread] = field(default_factory=list)
    # column -> "metric", "counter" or "timing" (trainprobe.metrics.roles); a column not named is a metric
    roles: dict[str, str] = field(default_factory=dict)
    # the last step the log says the run would reach (Megatron's ``iteration N/ 159576``, a golden file's
    # ``end_step``), when it says one
    declared_end: float | None = None
    # runs read from the same file on an axis of their own (an eval loop counted in epochs): reported beside
    # this one (trainprobe.metrics.axis)
    side_runs: list[RunLog] = field(default_factory=list)
    # what the reader understood of the file (trainprobe.metrics.coverage); None: a structured format read
    # record by record, where nothing is left over
    coverage: Coverage | None = None
    # the column the step axis came from (None: the row number) and why it was chosen
    # (trainprobe.metrics.step_axis)
    step_key: str | None = None
    step_why: str = ""
    # processes appending to the file at once (their steps interleave): its steps going back are no resumes
    writers: int = 1

    def __len__(self) -> int:
        return int(self.steps.shape[0])

    def role(self, column: str) -> str:
        return self.roles.get(column, "metric")

    @property
    def metrics(self) -> list[str]:
        """The columns the detectors watch (not counters or timings)."""
        return [c for c in self.columns if self.role(c) == "metric"]

    def mask(self, metric: str) -> np.ndarray:
        """Rows where ``metric`` was written (a literal NaN counts as written)."""
        got = self.present.get(metric)
        return got if got is not None else np.ones(len(self), dtype=bool)

    def to_json(self) -> dict[str, Any]:
        """Every value of the run, exactly (arrays as zlib-compressed little-endian bytes in base64, so NaN,
        Inf and the absent-cell payload survive): what :meth:`from_json` rebuilds the same run from, e.g.
        after ``logs --on`` analysed it on a far machine. Side runs are not kept (reading flattens them)."""
        return {
            "name": self.name,
            "path": self.path,
            "format": self.format,
            "steps": _pack(self.steps, "<f8"),
            "wall": None if self.wall is None else _pack(self.wall, "<f8"),
            "columns": {k: _pack(v, "<f8") for k, v in self.columns.items()},
            "present": {k: _pack(v, "|b1") for k, v in self.present.items()},
            "roles": dict(self.roles),
            "events": [{**e.to_json(), "row": e.row, "order": e.order} for e in self.events],
            "skipped_lines": self.skipped_lines,
            "unread": [[u.line_no, u.text, u.why] for u in self.unread],
            "declared_end": None
            if self.declared_end is None or not math.isfinite(self.declared_end)
            else self.declared_end,
            "coverage": None if self.coverage is None else self.coverage.to_json(),
            "step_key": self.step_key,
            "step_why": self.step_why,
            "writers": self.writers,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunLog:
        """The run :meth:`to_json` wrote; KeyError/ValueError for a document that is not one."""
        steps = _unpack(data["steps"], "<f8")
        columns = {str(k): _unpack(v, "<f8") for k, v in data["columns"].items()}
        present = {str(k): _unpack(v, "|b1") for k, v in data["present"].items()}
        if any(c.shape != steps.shape for c in [*columns.values(), *present.values()]):
            raise ValueError("a column's length is not the run's")
        return cls(
            name=str(data["name"]),
            path=str(data["path"]),
            format=str(data["format"]),
            steps=steps,
            columns=columns,
            present=present,
            wall=None if data["wall"] is None else _unpack(data["wall"], "<f8"),
            events=[Event.from_json(e) for e in data["events"]],
            skipped_lines=int(data["skipped_lines"]),
            unread=[Unread(int(n), str(text), str(why)) for n, text, why in data["unread"]],
            roles={str(k): str(v) for k, v in data["roles"].items()},
            declared_end=None if data["declared_end"] is None else float(data["declared_end"]),
            coverage=None if data.get("coverage") is None else Coverage.from_json(data["coverage"]),
            step_key=None if data.get("step_key") is None else str(data["step_key"]),
            step_why=str(data.get("step_why", "")),
            writers=int(data.get("writers", 1)),
        )


def _pack(array: np.ndarray, dtype: str) -> str:
    raw = np.ascontiguousarray(array, dtype=dtype).tobytes()
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def _unpack(text: str, dtype: str) -> np.ndarray:
    try:
        raw = zlib.decompress(base64.b64decode(text, validate=True))
    except (zlib.error, ValueError) as exc:
        raise ValueError(f"not a packed array ({exc})") from None
    return np.frombuffer(raw, dtype=dtype).astype(dtype[1:], copy=True)


# Absent cells travel through blocks as one particular NaN payload, so a literal NaN stays a value.
ABSENT = float(np.frombuffer(np.array([0x7FF8DEADBEEF0001], dtype=np.uint64).tobytes(), dtype=np.float64)[0])
_ABSENT_BITS = np.uint64(0x7FF8DEADBEEF0001)


def is_absent(col: FloatArray) -> np.ndarray:
    return np.asarray(np.ascontiguousarray(col).view(np.uint64) == _ABSENT_BITS)


# A table is held dense (rows x columns); one that would take more than this and be mostly holes is refused
# with a clear message rather than taken out of the machine's memory.
DENSE_LIMIT = 1 << 30
_HOLES_PER_VALUE = 16


class TooSparse(ValueError):
    """The dense table a log makes would be far bigger than its values (thousands of keys logged once)."""


def check_dense(n_rows: int, n_cols: int, n_values: int) -> None:
    """Raise :class:`TooSparse` for a rows x columns table over :data:`DENSE_LIMIT` bytes that is mostly
    holes (more than 16 cells per value logged)."""
    dense = n_rows * n_cols * 9  # a float64 and a presence flag per cell
    if dense > DENSE_LIMIT and n_rows * n_cols > _HOLES_PER_VALUE * max(n_values, 1):
        raise TooSparse(
            f"{n_cols:,} metrics over {n_rows:,} rows would take {dense / 2**30:.1f} GiB as a table for "
            f"{n_values:,} logged values: too sparse to read whole (most metrics are logged at a few rows); "
            "read a part of it, or drop the keys logged once"
        )


@dataclass
class Table:
    """What a builder collected, rows in file order: columns (``ABSENT`` where a row has no value), the wall
    clock per row (NaN where none), and each row's order key."""

    columns: dict[str, FloatArray]
    wall: FloatArray
    order: FloatArray
    units: dict[str, str]

    def __len__(self) -> int:
        return int(self.order.shape[0])


class ColumnBuilder:
    """Collects rows and blocks, then builds a ``Table``. Memory: every value once, held as one array per
    column and block (a block's 2-D array is split when it arrives), and one extra column while building."""

    def __init__(self) -> None:
        self._parts: dict[str, list[tuple[int, np.ndarray]]] = {}
        self._orders: list[np.ndarray] = []
        self._walls: list[tuple[int, np.ndarray]] = []
        self._rows: list[dict[str, float]] = []
        self._row_order: list[float] = []
        self._row_wall: list[float] = []
        self._flushed = 0
        self.units: dict[str, str] = {}
        self.n_rows = 0

    def add_row(self, row: dict[str, float], *, order: float | None = None, wall: float = np.nan) -> None:
        self._rows.append(row)
        self._row_order.append(float(self.n_rows if order is None else order))
        self._row_wall.append(wall)
        self.n_rows += 1

    def add_block(
        self,
        keys: tuple[str, ...],
        values: np.ndarray,
        *,
        order: np.ndarray | None = None,
        wall: np.ndarray | None = None,
    ) -> None:
        self._flush_rows()
        n = int(values.shape[0])
        start = self.n_rows
        for j, key in enumerate(keys):
            self._parts.setdefault(key, []).append(
                (start, np.ascontiguousarray(values[:, j], dtype=np.float64))
            )
        self._orders.append(np.arange(start, start + n, dtype=np.float64) if order is None else order)
        if wall is not None:
            self._walls.append((start, wall))
        self.n_rows += n
        self._flushed = self.n_rows

    def _flush_rows(self) -> None:
        if not self._rows:
            return
        start = self._flushed
        n = len(self._rows)
        keys: dict[str, None] = {}
        for row in self._rows:
            keys.update(dict.fromkeys(row))
        check_dense(self.n_rows, len(keys | dict.fromkeys(self._parts)), sum(len(r) for r in self._rows))
        for key in keys:
            col = np.full(n, ABSENT)
            for i, row in enumerate(self._rows):
                value = row.get(key)
                if value is not None:
                    col[i] = value
            self._parts.setdefault(key, []).append((start, col))
        self._orders.append(np.array(self._row_order, dtype=np.float64))
        self._walls.append((start, np.array(self._row_wall, dtype=np.float64)))
        self._rows, self._row_order, self._row_wall = [], [], []
        self._flushed = self.n_rows

    def build(self, *, consume: bool = True) -> Table:
        """The table; with ``consume`` the builder's parts are freed as columns are built (one-shot reads),
        without it the builder can take more rows and build again (``watch``)."""
        self._flush_rows()
        n = self.n_rows
        kept = sum(int(part.shape[0]) for parts in self._parts.values() for _, part in parts)
        check_dense(n, len(self._parts), kept)
        order = np.concatenate(self._orders) if self._orders else np.empty(0)
        perm = None if n < 2 or bool(np.all(order[1:] >= order[:-1])) else np.argsort(order, kind="stable")
        wall = np.full(n, np.nan)
        for start, part in self._walls:
            wall[start : start + part.shape[0]] = part
        columns: dict[str, FloatArray] = {}
        for key in list(self._parts):
            col = np.full(n, ABSENT)
            for start, part in self._parts.pop(key) if consume else self._parts[key]:
                col[start : start + part.shape[0]] = part
            columns[key] = col if perm is None else col[perm]
        if consume:
            self._orders, self._walls = [], []
        if perm is not None:
            order, wall = order[perm], wall[perm]
        return Table(columns, wall, order, self.units)


__all__ = [
    "ABSENT",
    "INTERNAL",
    "TOTAL_PREFIX",
    "WALL_KEY",
    "ColumnBuilder",
    "RunLog",
    "Table",
    "TooSparse",
    "Unread",
    "check_dense",
    "is_absent",
]
