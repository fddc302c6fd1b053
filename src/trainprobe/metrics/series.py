"""A run's metrics thinned for a chart: about ``max_points`` points per metric, each block's minimum and
maximum kept (a spike survives the thinning), and every non-finite value kept visible."""

from __future__ import annotations

from typing import Any

import numpy as np

from trainprobe.conventions import step_json
from trainprobe.metrics.table import RunLog


def downsample(run: RunLog, max_points: int) -> dict[str, dict[str, list[Any]]]:
    """Per metric: steps and values, min/max-preserving decimation to about ``max_points`` points."""
    out: dict[str, dict[str, list[Any]]] = {}
    for name, col in run.columns.items():
        rows = np.flatnonzero(run.mask(name))
        if rows.size == 0:
            continue
        if rows.size > max_points:
            per = int(np.ceil(rows.size / (max_points / 2)))
            n = rows.size // per * per
            blocks = col[rows[:n]].reshape(-1, per)
            finite = np.where(np.isfinite(blocks), blocks, np.nan)
            with np.errstate(invalid="ignore"):
                lo = np.nanargmin(np.where(np.isnan(finite), np.inf, finite), axis=1)
                hi = np.nanargmax(np.where(np.isnan(finite), -np.inf, finite), axis=1)
            base = np.arange(blocks.shape[0]) * per
            pick = np.sort(np.unique(np.concatenate([base + lo, base + hi, np.arange(n, rows.size)])))
            # Non-finite values must stay visible.
            bad = np.flatnonzero(~np.isfinite(col[rows]))
            pick = np.unique(np.concatenate([pick, bad[:200], [0, rows.size - 1]]))
            rows = rows[pick]
        vals = col[rows]
        out[name] = {
            "steps": [step_json(s) for s in run.steps[rows]],
            "values": [float(v) if np.isfinite(v) else None for v in vals],
        }
    return out


__all__ = ["downsample"]
