"""MLflow's file store (``mlruns/<experiment>/<run>/``): each ``metrics/<KEY>`` file (keys with ``/`` are
sub-folders) holds one ``<timestamp ms> <value> <step>`` line per logged value; ``meta.yaml`` and
``tags/mlflow.runName`` name the run. A run directory is read as one run, values of one step on one row,
the earliest timestamp of a step its wall clock."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainprobe.metrics.axis import finish_run
from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.table import ABSENT, ColumnBuilder, RunLog, Unread, check_dense
from trainprobe.metrics.walk import NotRead, files_under

_MAX_VALUES = 50_000_000
# What MLflow keeps of a run besides files the user logged (``artifacts/`` is walked for logs as any folder).
_OWN_DIRS = ("metrics", "params", "tags", "inputs", "outputs")


def _metric_files(metrics: Path, not_read: list[NotRead]) -> list[tuple[str, Path]]:
    return sorted((p.relative_to(metrics).as_posix(), p) for p in files_under(metrics, not_read))


def _read_metric(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(timestamps s, values, steps) of one metric file and how many lines were not ``ts value step``."""
    ts: list[float] = []
    values: list[float] = []
    steps: list[float] = []
    bad = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) < 2:
                bad += bool(parts)
                continue
            try:
                t, v = float(parts[0]), float(parts[1])
                s = float(parts[2]) if len(parts) > 2 else float(len(steps))
            except ValueError:
                bad += 1
                continue
            ts.append(t / 1000.0)
            values.append(v)
            steps.append(s)
            if len(values) > _MAX_VALUES:
                break
    return np.array(ts), np.array(values), np.array(steps), bad


def _run_name(run_dir: Path) -> str:
    tag = run_dir / "tags" / "mlflow.runName"
    if tag.is_file():
        name = tag.read_text(encoding="utf-8", errors="replace").strip()
        if name:
            return name
    meta = run_dir / "meta.yaml"
    if meta.is_file():
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("run_name:"):
                name = line.split(":", 1)[1].strip().strip("'\"")
                if name:
                    return name
    return run_dir.name


class MlflowReader:
    name = "mlflow"

    def claims(self, directory: Path) -> bool:
        return (directory / "metrics").is_dir() and (directory / "meta.yaml").is_file()

    def owns(self, directory: Path) -> tuple[frozenset[Path], frozenset[str]]:
        return frozenset({directory / "meta.yaml"}), frozenset(_OWN_DIRS)

    def read_dir(self, directory: Path, options: ReadOptions, not_read: list[NotRead]) -> list[RunLog]:
        per_key = {key: _read_metric(path) for key, path in _metric_files(directory / "metrics", not_read)}
        bad = sum(got[3] for got in per_key.values())
        all_steps = (
            np.unique(np.concatenate([got[2] for got in per_key.values()])) if per_key else np.empty(0)
        )
        builder = ColumnBuilder()
        n = all_steps.size
        wall = np.full(n, np.inf)
        keys = ("step", *per_key)
        check_dense(n, len(keys), sum(got[1].size for got in per_key.values()))
        block = np.full((n, len(keys)), ABSENT)
        block[:, 0] = all_steps
        for j, (ts, values, steps, _bad) in enumerate(per_key.values(), start=1):
            at = np.searchsorted(all_steps, steps)
            block[at, j] = values  # a step logged twice keeps its last value
            np.minimum.at(wall, at, ts)
        wall[~np.isfinite(wall)] = np.nan
        builder.add_block(keys, block, wall=wall)
        run = finish_run(
            builder, name=_run_name(directory), path=str(directory), fmt="mlflow", skipped_lines=bad
        )
        if bad:
            run.unread = [Unread(0, "", f"{bad} lines in metrics/ were not 'timestamp value step'")]
        return [run]


__all__ = ["MlflowReader"]
