"""A W&B run directory (``wandb/run-…`` or ``wandb/offline-run-…``) read as one run.

The history comes from the best source the directory has: the binary record log ``run-<id>.wandb``
(:mod:`.wandb_records`; every ``wandb.log`` call), else ``files/wandb-history.jsonl`` (older clients and
synced runs), else the console capture ``files/output.log`` read as a text log. Events (saves and the like)
come from ``files/output.log`` when the history is read elsewhere. ``files/wandb-summary.json`` alone holds
only final values, no series: a directory with nothing else is read as no rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.readers.jsonl import read_json_lines
from trainprobe.metrics.readers.text import read_text_file
from trainprobe.metrics.readers.wandb_records import wandb_run
from trainprobe.metrics.table import RunLog


def _records(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("run-*.wandb") if p.is_file())


class WandbDirReader:
    name = "wandb"

    def claims(self, directory: Path) -> bool:
        files = directory / "files"
        return (
            bool(_records(directory))
            or (files / "wandb-history.jsonl").is_file()
            or ((files / "wandb-summary.json").is_file() and (files / "output.log").is_file())
        )

    def read_dir(self, directory: Path, options: ReadOptions) -> list[RunLog]:
        files = directory / "files"
        output = files / "output.log"
        name = directory.name
        records = _records(directory)
        if records:
            run = wandb_run(records[-1], options, name=name)
        elif (files / "wandb-history.jsonl").is_file():
            run = read_json_lines(files / "wandb-history.jsonl", name=name, fmt="wandb")
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
