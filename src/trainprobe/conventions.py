"""What a run's files are called, each fact stated once: which step a name says, which names are logs,
which are checkpoints, which files the CheckpointWriter keeps beside a checkpoint, and how a step is written.

``checkpoint``, ``metrics``, ``triage`` and ``save`` all take these rules from here, so ``logs DIR`` and
``triage DIR`` pick the same log files, and ``logs --checkpoints`` and ``check`` read the same step from a
checkpoint's name. Stdlib only; shipped with ``trainprobe.errors`` (:mod:`trainprobe.remote.shipping`).
"""

from __future__ import annotations

import math
import os
import re

# -- the step a name states ------------------------------------------------------------------------

# "global_step1500", "step_2000", "step=2000" (Lightning's epoch=3-step=2000), "checkpoint-2000",
# "iter_0002000"; an epoch number is not a step, and neither is any other number in a name (resnet50.pt).
NAME_STEP = re.compile(r"(?i)(?:global_step|step|iteration|iter|checkpoint|ckpt)([-_=]?)(\d+)")
# A name that is only a number ("1200/", "500.pt") is a step too: frameworks name step folders so.
_ONLY_NUMBER = re.compile(r"^(\d+)(?:\.\w+)?$")


def step_in_name(path: str) -> tuple[int, str] | None:
    """(step, separator) a checkpoint's own name states (``checkpoint-2000`` -> (2000, "-")), or None."""
    name = os.path.basename(path.rstrip("/"))
    m = NAME_STEP.search(name)
    if m:
        return int(m.group(2)), m.group(1)
    m = _ONLY_NUMBER.match(name)
    return (int(m.group(1)), "") if m else None


def step_in_path(path: str) -> int | None:
    """The step a path's name states, else its folder's (``global_step1500/mp_rank_00_model_states.pt``)."""
    trimmed = path.rstrip("/")
    names = (os.path.basename(trimmed), os.path.basename(os.path.dirname(trimmed)))
    for name in names:
        m = NAME_STEP.search(name)
        if m:
            return int(m.group(2))
    for name in names:
        m = _ONLY_NUMBER.match(name)
        if m:
            return int(m.group(1))
    return None


# -- the CheckpointWriter's names ------------------------------------------------------------------

MANIFEST_SUFFIX = ".manifest.json"  # step-00000100.pt.manifest.json beside step-00000100.pt
LATEST_NAME = "latest"  # one line: the file name of the newest complete checkpoint
# A file being written is hidden and marked with its writer's pid: ".step-00000100.pt.tmp-4242".
TEMP_MARK = ".tmp-"


def is_sidecar(name: str) -> bool:
    """Whether a file in a checkpoint directory is one the writer keeps beside its checkpoints (a
    manifest, the ``latest`` pointer, a file still being written), not a checkpoint of its own."""
    name = os.path.basename(name.rstrip("/"))
    return (
        name == LATEST_NAME or name.endswith(MANIFEST_SUFFIX) or (name.startswith(".") and TEMP_MARK in name)
    )


# -- checkpoint and log names ----------------------------------------------------------------------

# Names a checkpoint is usually saved under; such a file that no reader claims is reported, never dropped.
CHECKPOINT_SUFFIXES = (
    ".pt",
    ".pth",
    ".bin",
    ".ckpt",
    ".safetensors",
    ".pkl",
    ".pickle",
    ".distcp",
    ".tar",
    ".h5",
    ".hdf5",
    ".keras",
    ".msgpack",
    ".npz",
    ".gguf",
    ".onnx",
    ".joblib",
    ".pb",
    ".index",
    ".pdparams",
)
# Names no checkpoint is saved under: config, notes, logs, scripts.
NOT_CHECKPOINT_SUFFIXES = (
    ".json",
    ".yaml",
    ".yml",
    ".txt",
    ".md",
    ".py",
    ".log",
    ".csv",
    ".tsv",
    ".out",
    ".err",
    ".jsonl",
    ".sh",
)

# What a log file may be called; the readers then decide by content (text accepts anything, hence a list).
LOG_SUFFIXES = (".log", ".txt", ".jsonl", ".json", ".csv", ".tsv", ".out", ".md", ".err", ".wandb")
# Names only a training log goes by: one of these that yields no metric rows is a log that was not read. A
# .txt, .md or .json without metric rows is most likely something else (notes, a config) and only skipped.
SURE_LOG_SUFFIXES = (".log", ".out", ".err", ".jsonl", ".csv", ".tsv")
# JSON files beside a checkpoint that hold no metrics (trainer_state.json, which does, is not among them).
#: the log files (a run directory counts as one) that one command reads: past them the rest are said not
#: read (exit 2), never dropped — 100,000 small logs are minutes of reading, and the report of a part is no
#: report of the whole. ``--max-logs N`` reads more (0: every one).
MAX_LOGS = 2_000

_NOT_LOGS = (MANIFEST_SUFFIX, ".index.json", "config.json", "metadata.json")


def _is_tfevents(name: str) -> bool:
    return "tfevents" in name


def is_log_name(path: str) -> bool:
    """Whether a file's name says it may be a training log (a hidden file never is)."""
    name = os.path.basename(path)
    if name.startswith("."):
        return False
    if _is_tfevents(name):
        return True
    lower = name.lower()
    return lower.endswith(LOG_SUFFIXES) and not lower.endswith(_NOT_LOGS)


def is_sure_log_name(path: str) -> bool:
    """Whether a file's name says it is a training log for sure (so no metric rows in it is a problem)."""
    name = os.path.basename(path)
    lower = name.lower()
    return is_log_name(name) and (
        _is_tfevents(name) or lower.endswith(SURE_LOG_SUFFIXES) or lower == "trainer_state.json"
    )


# -- writing a step --------------------------------------------------------------------------------


def step_text(x: float | None) -> str:
    """A step for people: ``100`` for 100.0, ``2.5``, ``nan``; ``?`` for no step."""
    if x is None:
        return "?"
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def step_json(x: float) -> int | float | str:
    """A step for JSON: an int when it is one (and exact as a float), ``"nan"``/``"inf"``/``"-inf"`` for
    the values JSON has no number for."""
    x = float(x)
    if not math.isfinite(x):
        return "nan" if x != x else ("inf" if x > 0 else "-inf")
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


__all__ = [
    "CHECKPOINT_SUFFIXES",
    "LATEST_NAME",
    "LOG_SUFFIXES",
    "MANIFEST_SUFFIX",
    "NAME_STEP",
    "NOT_CHECKPOINT_SUFFIXES",
    "SURE_LOG_SUFFIXES",
    "TEMP_MARK",
    "is_log_name",
    "is_sidecar",
    "is_sure_log_name",
    "step_in_name",
    "step_in_path",
    "step_json",
    "step_text",
]
