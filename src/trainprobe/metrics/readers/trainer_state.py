"""Hugging Face ``trainer_state.json``: ``log_history`` rows; sibling ``checkpoint-N`` folders are save
events."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from trainprobe.conventions import step_in_name
from trainprobe.errors import LogError
from trainprobe.metrics.axis import finish_run
from trainprobe.metrics.events import CHECKPOINT_SAVE, Event
from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.readers.json_values import flatten
from trainprobe.metrics.table import ColumnBuilder, RunLog


class TrainerStateReader:
    name = "hf-trainer-state"

    def sniff(self, path: Path, head: bytes) -> bool:
        return head.lstrip().startswith(b"{") and b'"log_history"' in head

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        try:
            state = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except (ValueError, RecursionError) as exc:
            raise LogError(str(path), f"not valid JSON ({exc})", hint="is the file complete?") from None
        history = state.get("log_history") if isinstance(state, dict) else None
        if not isinstance(history, list):
            raise LogError(str(path), "no log_history list in trainer_state.json")
        builder = ColumnBuilder()
        for entry in history:
            if isinstance(entry, dict):
                builder.add_row(flatten(entry))
        run = finish_run(builder, name=path.parent.name or path.stem, path=str(path), fmt="hf-trainer-state")
        # trainer_state.json sits in output_dir/checkpoint-N/; its siblings are the saves of this run, each at
        # the step its folder's name states (the rule check reads a unit's step by).
        parent = path.parent.parent if step_in_name(path.parent.name) is not None else path.parent
        saves = sorted(
            (found[0], d.name)
            for d in parent.iterdir()
            if (found := step_in_name(d.name)) is not None and d.is_dir()
        )
        for step, name in saves:
            row = int(np.searchsorted(run.steps, step, side="right"))
            where = str(parent / name)
            run.events.append(Event(CHECKPOINT_SAVE, float(step), row, text=where, path=where))
        return [run]
