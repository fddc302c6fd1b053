"""A text line that is a tag and a JSON event record (``:::MLLOG {"key": "eval_accuracy", "value": 0.78,
...}``): the record names its value by its ``key`` field, so the object is read as JSON, not as fields of
prose (where ``"key": "eval_accuracy"`` names no number). Other objects in a line (fairseq's
``{"loss": "9.8", "update": 0.1}``, quoted numbers and all) are left to the field reader, which reads them.

- an **event record** of the MLPerf logging library (``key``, ``value``, ``time_ms``, ``metadata`` with the
  counter it was logged at: ``epoch_num``, ``step_num`` or ``step``): a row ``{key: value}`` (a value that is
  an object flattens under the key: ``tracked_stats/throughput``) at that counter, its wall clock from
  ``time_ms``. A record without a counter (``global_batch_size``, ``submission_org``, ``run_start``) is
  configuration or a marker: read, but no row. A log uses one counter for its series; a record logged at
  another one (a summary at ``step`` in a log whose evaluations count ``epoch_num``) is no row of that
  axis and is left out.

Only a line whose message ends with the object and begins with at most three words before it is tried, so
a sentence that quotes a dict is not read as a record.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from trainprobe.metrics.readers.json_values import flatten

_TAGGED = re.compile(r"\s*(?:[^\s{]+\s+){0,3}?(\{.*\})\s*")
# the counters of an MLPerf event's metadata, and the column each becomes
_COUNTERS = (("epoch_num", "epoch"), ("step_num", "step"), ("step", "step"), ("iteration", "iteration"))
_MAX_CHARS = 1 << 14


class TaggedJson:
    """Reads tagged JSON lines into rows; remembers the counter the log's event records use."""

    def __init__(self) -> None:
        self.counter: str | None = None

    def read(self, body: str) -> tuple[dict[str, float], float] | None:
        """(row, wall clock in seconds or NaN) of a tagged JSON line (the row may be empty: read, no row),
        or None when the line is no tagged JSON object."""
        if not body.endswith("}") or len(body) > _MAX_CHARS:
            return None
        m = _TAGGED.fullmatch(body)
        if m is None:
            return None
        try:
            obj = json.loads(m.group(1))
        except (ValueError, RecursionError):
            return None
        if not isinstance(obj, dict):
            return None
        if "key" in obj and "value" in obj and isinstance(obj.get("metadata", {}), dict):
            return self._event(obj)
        return None

    def _event(self, obj: dict[str, Any]) -> tuple[dict[str, float], float]:
        ms = obj.get("time_ms")
        wall = float(ms) / 1000 if isinstance(ms, (int, float)) and not isinstance(ms, bool) else math.nan
        meta = obj.get("metadata") or {}
        found = next(((k, col) for k, col in _COUNTERS if _is_number(meta.get(k))), None)
        key, value = str(obj["key"]), obj["value"]
        if found is None:
            return {}, wall
        meta_key, column = found
        if self.counter is None:
            self.counter = meta_key
        if meta_key != self.counter:
            return {}, wall
        row: dict[str, float] = {}
        if isinstance(value, dict):
            row = flatten(value, key + "/")
        elif _is_number(value):
            row = {key: float(value)}
        if not row:
            return {}, wall
        row[column] = float(meta[meta_key])
        return row, wall


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


__all__ = ["TaggedJson"]
