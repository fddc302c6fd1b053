"""A W&B run directory (``wandb/run-…`` or ``wandb/offline-run-…``) read as one run.

The history comes from the best source the directory has: the binary record log ``run-<id>.wandb``
(:mod:`.wandb_records`; every ``wandb.log`` call), else ``files/wandb-history.jsonl`` (older clients and
synced runs), else the console capture ``files/output.log`` read as a text log. Events (saves and the like)
come from ``files/output.log`` when the history is read elsewhere. ``files/wandb-summary.json`` alone holds
only final values, no series: a directory with nothing else is read as no rows.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.readers.jsonl import read_json_lines
from trainprobe.metrics.readers.text import read_text_file
from trainprobe.metrics.readers.wandb_records import wandb_run
from trainprobe.metrics.table import RunLog
from trainprobe.metrics.walk import NotRead, regular_file

# What a W&B run directory keeps besides the history: its own files (never a user's log).
_BOOKKEEPING = (
    "files/wandb-summary.json",
    "files/wandb-history.jsonl",
    "files/wandb-metadata.json",
    "files/config.yaml",
    "files/requirements.txt",
    "files/conda-environment.yaml",
    "logs/debug.log",
    "logs/debug-internal.log",
    "logs/debug-core.log",
)


def _records(directory: Path) -> list[Path]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = (directory / n for n in names if n.startswith("run-") and n.endswith(".wandb"))
    return sorted(p for p in found if regular_file(p) is None)


def _history_source(directory: Path) -> Path | None:
    files = directory / "files"
    records = _records(directory)
    if records:
        return records[-1]
    if (files / "wandb-history.jsonl").is_file():
        return files / "wandb-history.jsonl"
    return None


class WandbDirReader:
    name = "wandb"

    def claims(self, directory: Path) -> bool:
        files = directory / "files"
        return (
            bool(_records(directory))
            or (files / "wandb-history.jsonl").is_file()
            or ((files / "wandb-summary.json").is_file() and (files / "output.log").is_file())
        )

    def owns(self, directory: Path) -> tuple[frozenset[Path], frozenset[str]]:
        """The history read, ``files/output.log`` and W&B's bookkeeping; an older ``run-*.wandb`` beside the
        newest, and any other log in the directory, is read by itself."""
        source = _history_source(directory)
        own = {directory / "files" / "output.log", *(directory / p for p in _BOOKKEEPING)}
        if source is not None:
            own.add(source)
        return frozenset(own), frozenset()

    def read_dir(self, directory: Path, options: ReadOptions, not_read: list[NotRead]) -> list[RunLog]:
        files = directory / "files"
        output = files / "output.log"
        name = directory.name
        source = _history_source(directory)
        if source is not None and source.suffix == ".wandb":
            run = wandb_run(source, options, name=name)
        elif source is not None:
            run = read_json_lines(source, name=name, fmt="wandb")
        elif output.is_file():
            run = read_text_file(output, name=name, event_patterns=list(options.event_patterns))
            run.format = "wandb"
            return [run]
        else:
            return []
        if output.is_file():
            console = read_text_file(output, name=name, event_patterns=list(options.event_patterns))
            events = []
            for e in console.events:
                if e.step == e.step:
                    e.row = int(np.searchsorted(run.steps, e.step, side="right")) if len(run) else 0
                    events.append(e)
            if events:
                run.events = events
        return [run]


__all__ = ["WandbDirReader"]
