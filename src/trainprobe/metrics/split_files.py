"""A split named by the file: a run's train and eval series written to two files under the same column names
(CatBoost's ``learn_error.tsv`` and ``test_error.tsv``, FastSpeech2's ``train/log.txt`` and ``val/log.txt``).

Only the file name can tell them apart, so the eval file's columns take the ``eval/`` prefix
(:data:`trainprobe.metrics.splits.EVAL_PREFIX`) and, when both files count their steps up, its rows join the
train run, so the detectors that pair an eval series with its train series (overfitting) see both. A file
named for a split alone (a scratch ``test.log``) with no partner of the same columns read beside it is left
as it is: the name of one file is weak evidence, a pair of files of one shape is not.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from trainprobe.metrics.splits import EVAL, EVAL_PREFIX, EVAL_WORDS, TRAIN, split_of
from trainprobe.metrics.table import RunLog

_WORDS = re.compile(r"[A-Za-z]+")
_TRAIN_WORDS = frozenset({"train", "training", "learn"})


def _split_of_name(name: str) -> str | None:
    words = {w.lower() for w in _WORDS.findall(name)}
    if words & EVAL_WORDS:
        return EVAL
    if words & _TRAIN_WORDS:
        return TRAIN
    return None


def file_split(path: str) -> str | None:
    """The split the file's own name says, or None."""
    return _split_of_name(Path(path).stem)


def folder_split(path: str) -> str | None:
    """The split the file's folder's name says, or None (``val/log.txt``)."""
    return _split_of_name(Path(path).parent.name)


def _plain(run: RunLog) -> set[str]:
    """The columns whose own name says no split."""
    return {c for c in run.columns if split_of(c) == TRAIN}


def _partner(runs: list[RunLog], ev: RunLog, *, by_folder: bool) -> RunLog | None:
    """The train run ``ev`` pairs with: a file beside it (``by_folder``: one of the same name in a sibling
    folder whose name says no eval split) with a metric column of the same name. A folder's name counts only
    so: a run directory called ``test_run`` makes no file in it an eval file."""
    here = Path(ev.path)
    for run in runs:
        if run is ev or not run.path or file_split(run.path) == EVAL:
            continue
        there = Path(run.path)
        if by_folder:
            near = (
                there.name == here.name
                and there.parent != here.parent
                and there.parent.parent == here.parent.parent
                and folder_split(run.path) != EVAL
            )
        else:
            near = there.parent == here.parent
        if near and _plain(run) & _plain(ev) & set(run.metrics):
            return run
    return None


def _rename_eval(run: RunLog) -> None:
    names = {
        c: (EVAL_PREFIX + c if split_of(c) == TRAIN and run.role(c) == "metric" else c) for c in run.columns
    }
    run.columns = {names[c]: v for c, v in run.columns.items()}
    run.present = {names[c]: v for c, v in run.present.items()}
    run.roles = {names.get(c, c): r for c, r in run.roles.items()}


def _counts_up(steps: np.ndarray) -> bool:
    return steps.size > 0 and not bool((np.diff(steps) < 0).any())


def _merge(train: RunLog, ev: RunLog) -> None:
    """``ev``'s rows into ``train``, in step order (train rows first at a step both have)."""
    n, m = len(train), len(ev)
    steps = np.concatenate([train.steps, ev.steps])
    order = np.argsort(steps, kind="stable")
    where = np.empty(n + m, dtype=np.int64)
    where[order] = np.arange(n + m)
    columns: dict[str, np.ndarray] = {}
    present: dict[str, np.ndarray] = {}
    for run, rows in ((train, where[:n]), (ev, where[n:])):
        for name, values in run.columns.items():
            col = columns.setdefault(name, np.full(n + m, np.nan))
            have = present.setdefault(name, np.zeros(n + m, dtype=bool))
            col[rows] = values
            have[rows] = run.mask(name)
    wall = None
    if train.wall is not None or ev.wall is not None:
        wall = np.full(n + m, np.nan)
        for run, rows in ((train, where[:n]), (ev, where[n:])):
            if run.wall is not None:
                wall[rows] = run.wall
    for e in train.events:
        e.row = int(where[e.row]) if 0 <= e.row < n else n + m if e.row >= n else e.row
    train.steps = steps[order]
    train.columns = columns
    train.present = {k: v for k, v in present.items() if not v.all()}
    train.wall = wall
    train.roles = {**ev.roles, **train.roles}
    train.skipped_lines += ev.skipped_lines
    train.step_why += f"; the eval rows of {ev.path} joined (its file name says the split)"


def pair_split_files(runs: list[RunLog]) -> list[RunLog]:
    """The runs, each eval file's run renamed (and joined to its train file's run where both count up)."""
    out = list(runs)
    for ev in [r for r in runs if r.path]:
        split = file_split(ev.path)
        by_folder = split is None and folder_split(ev.path) == EVAL
        if split != EVAL and not by_folder:
            continue
        partner = _partner(out, ev, by_folder=by_folder)
        if partner is None:
            continue
        _rename_eval(ev)
        if _counts_up(partner.steps) and _counts_up(ev.steps) and not ev.side_runs:
            _merge(partner, ev)
            out.remove(ev)
    return out


__all__ = ["file_split", "folder_split", "pair_split_files"]
