"""Things that happened during a run, next to which anomalies get explained: checkpoint saves, resumes,
epochs, learning-rate changes, eval runs, and anything a user names with ``--event REGEX``.

A save is an event only when a line says one happened (``Saving checkpoint to …``, ``… checkpoint saved``,
``saving model to '…/epoch=0-step=100.ckpt'``), or from a checkpoint file's own modification time; a line
that merely mentions checkpoints (``--save-interval 1000``, ``will save every 500 steps``, ``Loading
checkpoint …``, echoed source code) is not one. A save keeps the path its line names, so triage can match it
to the checkpoint on disk.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainprobe.conventions import (
    CHECKPOINT_SUFFIXES,
    NAME_STEP,
    NOT_CHECKPOINT_SUFFIXES,
    is_sidecar,
    step_in_name,
    step_in_path,
    step_json,
    step_text,
)

CHECKPOINT_SAVE = "checkpoint_save"
RESUME = "resume"
EPOCH = "epoch"
LR_CHANGE = "lr_change"
EVAL = "eval"
CUSTOM = "custom"
NONFINITE_LINE = "non_finite_reported"
FAILURE = "failure"

EVENT_KINDS = (CHECKPOINT_SAVE, RESUME, EPOCH, LR_CHANGE, EVAL, CUSTOM, NONFINITE_LINE, FAILURE)

# What a line says when a run fails, most specific first (a traceback ends in the error that names the
# cause: the cause is what the event says). Whole phrases, so a flag (``--kill-on-bad-exit``) or a metric
# name (``oom_count``) is none.
FAILURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "out of memory",
        re.compile(r"(?i)\bout of memory\b|OutOfMemoryError|\bOOM[- ]?kill|\bCUBLAS_STATUS_ALLOC"),
    ),
    (
        "NCCL timeout",
        re.compile(
            r"(?i)\bnccl\b.{0,200}\b(?:timeout|timed out)\b|watchdog caught collective operation timeout"
        ),
    ),
    ("killed", re.compile(r"(?i)\b(?:killed|sigkill|signal 9)\b|\bexitcode\s*:\s*-9\b")),
    (
        "aborted",
        re.compile(
            r"(?i)\b(?:aborted|sigabrt|core dumped|segmentation fault|sigsegv)\b|terminate called after"
        ),
    ),
    ("traceback", re.compile(r"^\s*Traceback \(most recent call last\)")),
    ("failed", re.compile(r"(?i)\bfailed\s*\(exitcode\s*:\s*-?[1-9]\d*\)|\bChildFailedError\b")),
)


def _any_word(*words: str) -> re.Pattern[str]:
    """One of ``words`` (regular expressions) as a whole word, any case."""
    return re.compile(r"(?i)\b(?:" + "|".join(words) + r")\b")


# A save that happened (or is happening): a past or progressive verb, and what was saved.
_SAVE_VERB = _any_word(
    *("saving", "saved", "wrote", "writing", "written", "stored", "storing", "dumped", "dumping"),
    *("exported", "exporting", "checkpointed", "checkpointing", "persisted", "persisting"),
)
_SAVED_THING = re.compile(r"(?i)checkpoint|ckpt|\bmodel\b|weights|\bstate|snapshot|optimizer")
_SAVE_ALONE = re.compile(r"(?i)\b(?:checkpoint|ckpt)\w*\s+(?:\S+\s+){0,3}?(?:saved|written|stored)\b")
# What a line says before its verb that makes it no save: a plan, a setting, a failure, a load.
_NOT_A_SAVE = _any_word(
    *("will", "would", "should", "every", "interval", "about to", r"skip\w*", "not", "no", "disabled?"),
    *("going to", r"plan\w*", r"frequen\w*"),
    *("failed", "unable", "cannot", "can't", "could not", r"load\w*", r"resum\w*", r"restor\w*"),
)
_FAILED_SAVE = _any_word("disabled", "failed", "skipped", "skipping", "unable", "cannot", "error")
# What is saved that is no checkpoint: a download, a package, a cache, a tracker's run data, data indices
# (wget's "Saving to: 'pytorch_model.bin'", pip's "Stored in directory: …/wheels/…"), or source
# (a pasted diff of ``checkpointing.py``).
_NOT_A_CHECKPOINT = re.compile(
    r"(?i)\b(?:download\w*|install\w*|wheels?|pip|wget|curl|cached?|indices|run data|locally|dataset|"
    r"predictions?|figures?|plots?|images?)\b|/\.cache/|\bsaving to:\s*\S|^diff --git|\.(?:py|sh|cpp)\b"
)
# Echoed source code and shell lines mention saving too; they are not events. An assignment marks code, but
# ``key=number`` without spaces does not: loggers write "Saving checkpoint to ... (step=10)", while source
# spaces its "save_every : int = 0".
_CODE_LINE = re.compile(
    r"^\s*(?:#|def\s|class\s|if\s|for\s|while\s|return\b|import\s|from\s|with\s|elif\s|else:|try:|except\b|--|\$)"
    r"|\w\s+=\s*\S|\w\s*\+=|\w=(?![-+]?\d[\w.+-]*(?:[\s,;)\]]|$))\S|\w\(|\\\s*$|[:{(\[]\s*$"
)
_QUOTED = re.compile(r"'[^'\n]{0,512}'|\"[^\"\n]{0,512}\"")
# A line that says a NaN/Inf appeared (fairseq's nan_detector: "Inf detected in output of …", "loss is nan",
# vw's "update is NAN, replacing with 0"),
# not a routine fp16 overflow notice ("OVERFLOW! … Skipping step").
_NONFINITE_LINE = re.compile(
    r"(?i)\b(?:nan|inf|infinity|non-finite)\b\W{0,3}(?:\w+\W+){0,2}?(?:detected|found|encountered)\b"
    r"|\b(?:detected|found|encountered)\W+(?:\w+\W+){0,2}?(?:nan|inf|non-finite)\b"
    r"|\b(?:loss|update|gradient|grad|prediction|output)s?\b\W{0,3}(?:is|are|became|=)\W{0,3}(?:nan|inf)\b"
    # vw's "NAN prediction in example 1, forcing 0": a NaN named by what it is in, in capitals or not
    r"|\b(?:nan|inf)\s+(?:loss|update|gradient|grad|prediction|output)s?\b"
)
_EPOCH_LINE = re.compile(r"(?i)^\W*(?:start(?:ing)?\s+)?epoch\s*[:=#]?\s*(\d+)")
_STEP_IN_LINE = re.compile(r"(?i)\b(?:global[_ ]step|step|iteration|iter|it)\s*[:=#]?\s*(\d{1,15})\b")
# A file's mtime counts as a save while the log's wall clock runs: from a minute before its first line
# (clocks drift) to an hour after its last (a final save, then an eval that logs nothing).
_BEFORE_S = 60.0
_AFTER_S = 3600.0
_MAX_USER_LINE = 4096  # a user's --event regex is not tried on a longer line (trainprobe.metrics.user_regex)


@dataclass
class Event:
    """One event. ``row`` is the index of the first metric row logged after it (for ordering against rows);
    ``path`` the file or directory a save line names; ``order`` where a reader saw it (a line number)."""

    kind: str
    step: float
    row: int
    text: str = ""
    wall: float | None = None
    stall_s: float | None = None
    path: str | None = None
    order: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "step": step_json(self.step),
            "text": self.text,
            "path": self.path,
            "wall": None if self.wall is None or not math.isfinite(self.wall) else self.wall,
            "stall_s": None if self.stall_s is None else round(self.stall_s, 3),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        """The event :meth:`to_json` wrote (``row`` and ``order`` when the document keeps them, as a run's
        exact form does; else -1 and None)."""
        wall, stall = data.get("wall"), data.get("stall_s")
        order = data.get("order")
        return cls(
            str(data["kind"]),
            float(data["step"]),
            int(data.get("row", -1)),
            text=str(data.get("text", "")),
            wall=None if wall is None else float(wall),
            stall_s=None if stall is None else float(stall),
            path=None if data.get("path") is None else str(data["path"]),
            order=None if order is None else float(order),
        )

    def describe(self) -> str:
        what = {
            CHECKPOINT_SAVE: "the checkpoint save",
            RESUME: "the resume",
            EPOCH: "the epoch boundary",
            LR_CHANGE: "the learning-rate change",
            EVAL: "the eval run",
            CUSTOM: f"the event '{self.text[:40]}'",
            NONFINITE_LINE: "the non-finite value the log reports",
            FAILURE: f"the failure ({failure_of(self.text) or 'failed'})",
        }.get(self.kind, self.kind)
        out = f"{what} at step {step_text(self.step)}"
        if self.stall_s is not None:
            out += f", which stalled logging {self.stall_s:.0f} s"
        return out


def looks_like_code(line: str) -> bool:
    """Echoed source or a shell line (quoted strings and paths, which may hold ``=`` and ``(``, left out)."""
    bare = " ".join(t if "/" not in t else "PATH" for t in _QUOTED.sub(" ", line).split(" "))
    return bool(_CODE_LINE.search(bare))


def is_save_line(line: str) -> bool:
    """Whether a log line says that a checkpoint was (or is being) saved."""
    if looks_like_code(line):
        return False
    verb = _SAVE_VERB.search(line)
    if verb is not None:
        if not (_SAVED_THING.search(line) or save_path(line)):
            return False
    elif not _SAVE_ALONE.search(line):
        return False
    if _FAILED_SAVE.search(line) or _NOT_A_CHECKPOINT.search(line):
        return False
    return not _NOT_A_SAVE.search(line[: verb.start()] if verb is not None else line)


def save_path(line: str) -> str | None:
    """The file or directory a save line names: a token with a ``/`` or a checkpoint suffix, quotes and
    trailing punctuation taken off."""
    for raw in line.split():
        token = raw.strip("'\"`,;()[]{}<>").rstrip(".:!")
        if len(token) < 2 or "://" in token:
            continue
        name = token.rsplit("/", 1)[-1]
        has_suffix = name.lower().endswith(CHECKPOINT_SUFFIXES)
        if has_suffix or ("/" in token and any(c.isalnum() for c in name or token) and "=" not in token[:1]):
            return token
        if NAME_STEP.fullmatch(token):
            return token
    return None


def save_step(line: str, path: str | None) -> float | None:
    """The step a save line names: in its path (``checkpoint-500``, ``global_step100``, ``step=100.ckpt``, as
    ``check`` reads it), else in its words (``at iteration 100``)."""
    in_path = step_in_path(path) if path else None
    if in_path is not None:
        return float(in_path)
    m = _STEP_IN_LINE.search(line)
    return float(m.group(1)) if m else None


def classify_line(line: str, custom: list[re.Pattern[str]] | None = None) -> tuple[str, float | None] | None:
    """An event kind for a non-metric log line (and a step it names), or None."""
    for pattern in custom or ():
        if len(line) <= _MAX_USER_LINE and pattern.search(line):
            return CUSTOM, _step_named(line)
    if _NONFINITE_LINE.search(line):
        return NONFINITE_LINE, None
    if failure_of(line) is not None:
        return FAILURE, None
    if is_save_line(line):
        return CHECKPOINT_SAVE, save_step(line, save_path(line))
    if looks_like_code(line):
        return None
    m = _EPOCH_LINE.match(line)
    if m:
        return EPOCH, None
    return None


def event_from_line(
    line: str,
    custom: list[re.Pattern[str]] | None = None,
    *,
    order: float | None = None,
    wall: float | None = None,
) -> Event | None:
    """The event a log line records (step NaN when it names none: the reader puts it after the row
    before)."""
    got = classify_line(line, custom)
    if got is None:
        return None
    kind, step = got
    path = save_path(line) if kind == CHECKPOINT_SAVE else None
    return Event(
        kind,
        float("nan") if step is None else step,
        -1,
        text=line.strip()[:200],
        wall=wall,
        path=path,
        order=order,
    )


# Source that handles a failure (not the general code test: an error's own line ends in ``:`` and names
# ``WorkNCCL(SeqNum=1)``, which reads as code).
_SOURCE_LINE = re.compile(
    r"^\s*(?:except|raise|if|elif|while|def|class|import|from|return|try|with|assert)\b|^\s*(?:#|//)"
)


def failure_of(line: str) -> str | None:
    """What failed, when ``line`` says a run failed (out of memory, NCCL timeout, killed, aborted, a
    traceback), else None. Echoed source (``except torch.cuda.OutOfMemoryError:``) says nothing."""
    for cause, pattern in FAILURES:
        if pattern.search(line):
            return None if _SOURCE_LINE.match(line) else cause
    return None


def merge_failures(events: list[Event]) -> list[Event]:
    """One failure per point of failure: the lines of one traceback, or every rank's copy of it, with no
    metric row between them are one event, named by its most specific cause."""
    out: list[Event] = []
    rank = {cause: i for i, (cause, _) in enumerate(FAILURES)}
    for e in events:
        prev = next((p for p in reversed(out) if p.kind == FAILURE), None)
        if e.kind == FAILURE and prev is not None and prev.row == e.row:
            new, old = failure_of(e.text), failure_of(prev.text)
            if new is not None and old is not None and rank[new] < rank[old]:
                prev.text = e.text
            continue
        out.append(e)
    return out


def merge_saves(events: list[Event]) -> list[Event]:
    """One save announced in two lines (``saving checkpoint …`` then ``successfully saved …``) is one
    event."""
    out: list[Event] = []
    for e in events:
        prev = out[-1] if out else None
        if (
            prev is not None
            and e.kind == prev.kind == CHECKPOINT_SAVE
            and (e.step == prev.step or e.step != e.step or prev.step != prev.step)
            and (e.path is None or prev.path is None or e.path == prev.path)
        ):
            if prev.step != prev.step:
                prev.step = e.step
            prev.path = prev.path or e.path
            continue
        out.append(e)
    return out


def _step_named(line: str) -> float | None:
    m = _STEP_IN_LINE.search(line)
    return float(m.group(1)) if m else None


def events_from_checkpoint_dir(directory: Path, steps: np.ndarray, wall: np.ndarray | None) -> list[Event]:
    """Checkpoint saves from the files/dirs in ``directory``: the step in the name (as ``check`` reads it),
    else the modification time placed on the wall clock while the run logged. The writer's side files
    (manifest, ``latest``), hidden files and names no checkpoint goes by (``.json``, ``.log``) are no saves;
    a number that is no step (``resnet50.pt``) is not read as one."""
    found: list[Event] = []
    try:
        entries = sorted(directory.iterdir())
    except OSError as exc:
        from trainprobe.errors import LogError

        raise LogError(str(directory), f"cannot list the checkpoints ({exc.strerror or exc})") from None
    for entry in entries:
        if not _may_be_a_save(entry):
            continue
        try:
            mtime = entry.stat().st_mtime
        except OSError:
            continue
        in_name = step_in_name(entry.name)
        step = float(in_name[0]) if in_name is not None else _step_at_mtime(steps, wall, mtime)
        if step is None:
            continue
        row = int(np.searchsorted(steps, step, side="right")) if len(steps) else 0
        found.append(Event(CHECKPOINT_SAVE, step, row, text=str(entry), wall=mtime, path=str(entry)))
    return found


def _step_at_mtime(steps: np.ndarray, wall: np.ndarray | None, mtime: float) -> float | None:
    """The logged step a file's modification time falls on; None without a wall clock, or for a file
    written before the run logged (a pretrained model it started from) or long after it stopped."""
    if wall is None or not len(steps):
        return None
    finite = wall[np.isfinite(wall)]
    if not len(finite) or not finite.min() - _BEFORE_S <= mtime <= finite.max() + _AFTER_S:
        return None
    order = np.searchsorted(np.nan_to_num(wall, nan=-np.inf), mtime)
    return float(steps[min(int(order), len(steps) - 1)])


def _may_be_a_save(entry: Path) -> bool:
    name = entry.name
    if name.startswith(".") or is_sidecar(name):
        return False
    return entry.is_dir() or not name.lower().endswith(NOT_CHECKPOINT_SUFFIXES)


__all__ = [
    "CHECKPOINT_SAVE",
    "CUSTOM",
    "EPOCH",
    "EVAL",
    "EVENT_KINDS",
    "FAILURE",
    "FAILURES",
    "LR_CHANGE",
    "NONFINITE_LINE",
    "RESUME",
    "Event",
    "classify_line",
    "event_from_line",
    "events_from_checkpoint_dir",
    "failure_of",
    "is_save_line",
    "looks_like_code",
    "merge_failures",
    "merge_saves",
    "save_path",
    "save_step",
]
