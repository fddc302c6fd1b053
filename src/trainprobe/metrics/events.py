"""Things that happened during a run, next to which anomalies get explained: checkpoint saves, resumes,
epochs,
learning-rate changes, eval runs, and anything a user names with ``--event REGEX``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CHECKPOINT_SAVE = "checkpoint_save"
RESUME = "resume"
EPOCH = "epoch"
LR_CHANGE = "lr_change"
EVAL = "eval"
CUSTOM = "custom"

EVENT_KINDS = (CHECKPOINT_SAVE, RESUME, EPOCH, LR_CHANGE, EVAL, CUSTOM)

_SAVE_LINE = re.compile(
    r"(?i)\b(?:sav(?:e|es|ed|ing)\s+(?:\S+\s+){0,3}?(?:checkpoint|ckpt|model|state|weights)"
    r"|(?:checkpoint|ckpt)\S*\s+(?:\S+\s+){0,3}?(?:saved|written)"
    r"|writ(?:e|ing)\s+(?:a\s+)?checkpoint)"
)
# Echoed source code and shell lines mention saving too; they are not events. An assignment marks code, but
# ``key=number`` without spaces does not: loggers write "Saving checkpoint to ... (step=10)", while source
# spaces its "save_every : int = 0".
_CODE_LINE = re.compile(
    r"^\s*(?:#|def\s|class\s|if\s|for\s|while\s|return\b|import\s|from\s|with\s|elif\s|else:|try:|except\b|--|\$)"
    r"|\w\s+=\s*\S|\w\s*\+=|\w=(?![-+]?\d[\w.+-]*(?:[\s,;)\]]|$))\S|\w\(|\\\s*$|[:{(\[]\s*$"
)
_EPOCH_LINE = re.compile(r"(?i)^\W*(?:start(?:ing)?\s+)?epoch\s*[:=#]?\s*(\d+)")
_STEP_IN_LINE = re.compile(
    r"(?i)\b(?:step|iteration|iter|global_step|checkpoint-|step_|step-)\s*[:=#]?\s*(\d+)"
)
_CKPT_NAME_STEP = re.compile(r"(\d+)")


@dataclass
class Event:
    """One event. ``row`` is the index of the first metric row logged after it (for ordering against rows)."""

    kind: str
    step: float
    row: int
    text: str = ""
    wall: float | None = None
    stall_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "step": _int_or_float(self.step),
            "text": self.text,
            "wall": self.wall,
            "stall_s": None if self.stall_s is None else round(self.stall_s, 3),
        }

    def describe(self) -> str:
        what = {
            CHECKPOINT_SAVE: "the checkpoint save",
            RESUME: "the resume",
            EPOCH: "the epoch boundary",
            LR_CHANGE: "the learning-rate change",
            EVAL: "the eval run",
            CUSTOM: f"the event '{self.text[:40]}'",
        }.get(self.kind, self.kind)
        out = f"{what} at step {_int_or_float(self.step)}"
        if self.stall_s is not None:
            out += f", which stalled logging {self.stall_s:.0f} s"
        return out


def _int_or_float(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def classify_line(line: str, custom: list[re.Pattern[str]] | None = None) -> tuple[str, float | None] | None:
    """An event kind for a non-metric log line (and a step it names), or None."""
    for pattern in custom or ():
        if pattern.search(line):
            return CUSTOM, _step_named(line)
    if _CODE_LINE.search(line):
        return None
    if _SAVE_LINE.search(line):
        return CHECKPOINT_SAVE, _step_named(line)
    m = _EPOCH_LINE.match(line)
    if m:
        return EPOCH, None
    return None


def _step_named(line: str) -> float | None:
    m = _STEP_IN_LINE.search(line)
    return float(m.group(1)) if m else None


def events_from_checkpoint_dir(directory: Path, steps: np.ndarray, wall: np.ndarray | None) -> list[Event]:
    """Checkpoint saves from the files/dirs in ``directory``: the step in the name, else the mtime mapped
    onto wall."""
    found: list[Event] = []
    for entry in sorted(directory.iterdir()):
        nums = _CKPT_NAME_STEP.findall(entry.name)
        mtime = entry.stat().st_mtime
        if nums:
            step = float(nums[-1])
        elif wall is not None and np.isfinite(wall).any():
            order = np.searchsorted(np.nan_to_num(wall, nan=-np.inf), mtime)
            step = float(steps[min(int(order), len(steps) - 1)]) if len(steps) else 0.0
        else:
            continue
        row = int(np.searchsorted(steps, step, side="right")) if len(steps) else 0
        found.append(Event(CHECKPOINT_SAVE, step, row, text=str(entry), wall=mtime))
    return found
