"""Reading paths into runs: a file by its content, a directory as run directories (W&B, MLflow) and files,
and one clear error for a log that gives no metric rows, with the first lines and why each was not one."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainprobe.conventions import MAX_LOGS, is_log_name
from trainprobe.errors import LogError, UsageError
from trainprobe.metrics.axis import FORCED_STEP
from trainprobe.metrics.events import FAILURE
from trainprobe.metrics.readers import DIR_READERS, READERS, LogReader, ReadOptions, RunDirReader
from trainprobe.metrics.table import RunLog, TooSparse, Unread
from trainprobe.metrics.walk import NotRead, regular_file, walk

_HEAD = 65536
_SHOWN = 6


def past_logs_why(max_logs: int, under: int | None = None) -> str:
    """Why a log past ``max_logs`` was not read (``under``: the count of those under a directory) — the
    words every command uses."""
    what = "past" if under is None else f"{under:,} log file{'s' * (under != 1)} under it, past"
    return f"{what} the {max_logs:,} log files a command reads (--max-logs N reads more, 0 every one)"


@dataclass
class LogBudget:
    """How many more logs the command reads (``left`` None: no bound), shared by the paths it was given."""

    max_logs: int = MAX_LOGS
    left: int | None = None

    def __post_init__(self) -> None:
        self.left = self.max_logs if self.max_logs > 0 else None

    def take(self) -> bool:
        """Whether one more log is read (and counted)."""
        if self.left is None:
            return True
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    def split(self, paths: Sequence[str]) -> tuple[list[str], list[str]]:
        """(the paths read, those past the budget), in the order given."""
        keep = [p for p in paths if self.take()]
        return keep, list(paths[len(keep) :])


def pick_reader(path: Path, *, checked: bool = False) -> LogReader:
    """The reader whose sniff takes the file's first 64 KB; ``checked``: the walk already found ``path`` a
    regular file (its ``stat`` is not taken twice)."""
    why = None if checked else regular_file(path)
    if why is not None:
        raise LogError(str(path), why)
    with open(path, "rb") as fh:
        head = fh.read(_HEAD)
    for reader in READERS:
        if reader.sniff(path, head):
            return reader
    raise LogError(str(path), "a binary file that is no log format trainprobe reads")


def _read_file(path: Path, options: ReadOptions, *, checked: bool = False) -> list[RunLog]:
    try:
        reader = pick_reader(path, checked=checked)
        return with_side_runs(reader.read(path, options))
    except OSError as exc:
        raise LogError(str(path), f"cannot read ({exc.strerror or exc})") from None
    except TooSparse as exc:
        raise LogError(str(path), str(exc)) from None
    except (MemoryError, RecursionError, OverflowError) as exc:
        raise LogError(
            str(path), f"cannot read ({type(exc).__name__})", hint="is the file damaged?"
        ) from None


def with_side_runs(runs: list[RunLog]) -> list[RunLog]:
    """Each run followed by the runs read from its file on an axis of their own."""
    out: list[RunLog] = []
    for run in runs:
        out.append(run)
        out.extend(run.side_runs)
        run.side_runs = []
    return out


def _claimer(directory: Path) -> RunDirReader | None:
    """The directory reader that claims ``directory`` (one that cannot even look is no claim: its files are
    then met, and said, one by one)."""
    for reader in DIR_READERS:
        try:
            if reader.claims(directory):
                return reader
        except OSError:
            continue
    return None


def _read_run_dir(
    reader: RunDirReader, path: Path, options: ReadOptions, not_read: list[NotRead], runs: list[RunLog]
) -> None:
    try:
        runs.extend(with_side_runs(reader.read_dir(path, options, not_read)))
    except TooSparse as exc:
        not_read.append(NotRead(str(path), str(exc)))
    except LogError as exc:
        not_read.append(NotRead(str(path), exc.message))


def _walk(root: Path, options: ReadOptions, not_read: list[NotRead], budget: LogBudget) -> list[RunLog]:
    """Run directories a directory reader claims, read as a run (the files it reads and the folders it owns
    taken out of the walk); every other log file by itself. What cannot be opened goes to ``not_read``, and
    so does, as one entry, the count of logs past the budget."""
    runs: list[RunLog] = []
    owned: set[Path] = set()
    past = 0
    for node in walk(root, not_read):
        claimed = _claimer(node.path)
        if claimed is not None:
            files, dirs = claimed.owns(node.path)
            owned.update(files)
            node.dirs[:] = [d for d in node.dirs if d not in dirs]
            if budget.take():
                _read_run_dir(claimed, node.path, options, not_read, runs)
            else:
                past += 1  # and the other logs beside it are still met (and counted) below
        for name in node.files:
            path = node.path / name
            if path in owned or not is_log_name(name):
                continue
            if not budget.take():
                past += 1
                continue
            why = regular_file(path)
            if why is not None:
                not_read.append(NotRead(str(path), why))
                continue
            try:
                runs.extend(_read_file(path, options, checked=True))
            except LogError as exc:  # one damaged log is said, and the rest of the tree still read
                not_read.append(NotRead(str(path), exc.message.removeprefix(f"{path}: ")))
    if past:
        not_read.append(NotRead(str(root), past_logs_why(budget.max_logs, past)))
    return runs


def read_logs(
    path: Path | str,
    *,
    event_patterns: list[re.Pattern[str]] | None = None,
    line_pattern: re.Pattern[str] | None = None,
    not_read: list[NotRead] | None = None,
    step: str | None = None,
    budget: LogBudget | None = None,
) -> list[RunLog]:
    """Read one log file (format detected from its content), a run directory, or every log under a
    directory. Runs with no rows are left out of a directory's list. Paths under a directory that could not
    be opened go to ``not_read`` (given: the caller reports them; not given: any makes a LogError).
    ``step`` (``--step KEY``): the column each run takes as its step axis, where it has one. ``budget``:
    the logs still to read (shared by the paths of one command; default: :data:`MAX_LOGS`), the rest not
    read."""
    token = FORCED_STEP.set(step)
    try:
        return _read_logs(path, event_patterns, line_pattern, not_read, budget or LogBudget())
    finally:
        FORCED_STEP.reset(token)


def _read_logs(
    path: Path | str,
    event_patterns: list[re.Pattern[str]] | None,
    line_pattern: re.Pattern[str] | None,
    not_read: list[NotRead] | None,
    budget: LogBudget,
) -> list[RunLog]:
    options = ReadOptions(tuple(event_patterns or ()), line_pattern)
    path = Path(path)
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT and not os.path.islink(path):
            raise UsageError(f"{path}: no such file or directory", hint="check the path") from None
    if path.is_dir():
        missed: list[NotRead] = [] if not_read is None else not_read
        before = len(missed)
        runs = _walk(path, options, missed, budget)
        if not_read is None and missed:
            raise LogError(f"{missed[0].path}", f"not read: {missed[0].why}")
        if not runs and len(missed) > before:
            raise LogError(
                str(path),
                f"no log could be read; {len(missed) - before} path(s) not read, the first: "
                f"{missed[before].path} ({missed[before].why})",
            )
        if not runs:
            raise LogError(
                str(path),
                "no log files in this directory",
                hint="pass a log file, or a directory with *.log, *.jsonl, *.csv, tfevents, W&B or MLflow "
                "runs",
            )
        found = [r for r in runs if len(r)]
        if not found:
            raise no_rows_error(runs)
        return found
    if not budget.take():
        why = past_logs_why(budget.max_logs)
        if not_read is None:
            raise LogError(str(path), why)
        not_read.append(NotRead(str(path), why))
        return []
    return _read_file(path, options)


#: the fewest values of a timing series that make a log of durations alone a benchmark's
MIN_TIMED_ROWS = 3


def gives_series(run: RunLog) -> bool:
    """Whether a run read gives the report something: a metric, or — a benchmark that logs durations
    alone — a timing series of :data:`MIN_TIMED_ROWS` values or more, when no line of its file that looks
    like metrics was left unread and the run did not fail (a log whose timings alone were understood while
    lines like metrics were not is no benchmark, nor is a crash log's one "time to load" line: both are
    reported as not read)."""
    if not len(run):
        return False
    if run.metrics:
        return True
    if any(e.kind == FAILURE for e in run.events) or run.coverage is None or run.coverage.missed_lines:
        return False  # a crash before any metric, or lines like metrics left unread
    return any(run.role(c) == "timing" and int(run.mask(c).sum()) >= MIN_TIMED_ROWS for c in run.columns)


def no_rows_error(runs: list[RunLog]) -> LogError:
    """The error for logs that gave no metric rows: the first lines read, and why each was not one."""
    where = ", ".join(dict.fromkeys(r.path for r in runs)) or "input"
    failed = next((e for r in runs for e in r.events if e.kind == FAILURE), None)
    if failed is not None:
        return LogError(
            where,
            f"no metric rows found: the run failed before its first metric ({failed.text[:160]!r})",
            hint="the log ends in a failure; fix it and run again",
        )
    unread: list[Unread] = [u for r in runs for u in r.unread][:_SHOWN]
    if not unread:
        return LogError(
            where, "no metric rows found", hint="is this a training log? it holds no lines with fields"
        )
    shown = "; ".join(f"line {u.line_no}: {u.text[:80]!r} ({u.why})" for u in unread)
    return LogError(
        where,
        f"no metric rows found — the first lines read: {shown}",
        hint="if these lines do hold metrics, give their shape with --pattern REGEX "
        "(named groups: step and each metric, e.g. 'it (?P<step>\\d+) .*loss (?P<loss>\\S+)')",
    )


__all__ = [
    "LogBudget",
    "gives_series",
    "no_rows_error",
    "past_logs_why",
    "pick_reader",
    "read_logs",
]
