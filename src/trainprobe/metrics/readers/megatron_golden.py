"""Megatron-LM's golden values (``tests/functional_tests/…/golden_values_*.json``): one object per metric,
``{"lm loss": {"start_step": 1, "end_step": 2000, "step_interval": 5, "values": {"1": 10.5, "5": …}}}`` (older
files give ``values`` as a list from ``start_step`` on). The string ``"nan"`` marks a step with no value
recorded: an absent cell, not a NaN. ``end_step`` is the last step the file declares; a run whose values stop
before it did not finish (``RunLog.declared_end``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from trainprobe.errors import LogError
from trainprobe.metrics.axis import finish_run
from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.table import ABSENT, ColumnBuilder, RunLog

_MAX_BYTES = 256 << 20


def _series(spec: dict[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    values = spec.get("values")
    start = spec.get("start_step", 0)
    interval = spec.get("step_interval", 1)
    pairs: list[tuple[float, float]] = []
    if isinstance(values, dict):
        for step, value in values.items():
            try:
                s = float(step)
            except ValueError:
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                pairs.append((s, float(value)))
    elif isinstance(values, list) and isinstance(start, (int, float)) and isinstance(interval, (int, float)):
        for i, value in enumerate(values):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                pairs.append((float(start + i * interval), float(value)))
    else:
        return None
    if not pairs:
        return None
    arr = np.array(pairs, dtype=np.float64)
    return arr[:, 0], arr[:, 1]


def _is_golden(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and bool(obj)
        and all(isinstance(v, dict) and "values" in v for v in obj.values())
    )


class MegatronGoldenReader:
    name = "megatron-golden"

    def sniff(self, path: Path, head: bytes) -> bool:
        return head.lstrip().startswith(b"{") and b'"start_step"' in head and b'"values"' in head

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        if path.stat().st_size > _MAX_BYTES:
            raise LogError(str(path), f"larger than {_MAX_BYTES >> 20} MB: not a golden-values file")
        try:
            obj = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except (ValueError, RecursionError) as exc:
            raise LogError(str(path), f"not valid JSON ({exc})", hint="is the file complete?") from None
        if not _is_golden(obj):
            raise LogError(str(path), "not Megatron golden values: each key should hold {start_step, values}")
        series = {k: got for k, v in obj.items() if (got := _series(v)) is not None}
        steps = np.unique(np.concatenate([s for s, _ in series.values()])) if series else np.empty(0)
        keys = ("step", *series)
        block = np.full((steps.size, len(keys)), ABSENT)
        block[:, 0] = steps
        for j, (s, v) in enumerate(series.values(), start=1):
            block[np.searchsorted(steps, s), j] = v
        builder = ColumnBuilder()
        builder.add_block(keys, block)
        run = finish_run(builder, name=path.stem, path=str(path), fmt="megatron-golden")
        ends = [v.get("end_step") for v in obj.values() if isinstance(v.get("end_step"), (int, float))]
        run.declared_end = float(max(ends)) if ends else None
        return [run]


__all__ = ["MegatronGoldenReader"]
