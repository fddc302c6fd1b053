"""Gather everything a run directory says about itself: its logs (analysed by ``trainprobe.metrics``) and its
checkpoints (scanned and checked by ``trainprobe.checkpoint``), as one JSON-ready dict.

This is the part of ``triage`` that runs where the files are: it imports only the standard library, numpy,
``trainprobe.checkpoint`` and ``trainprobe.metrics``, so ``triage --on TARGET`` ships these packages and
calls :func:`collect` on the far side. Conclusions are drawn locally from its JSON
(:mod:`trainprobe.triage.conclude`).
"""

from __future__ import annotations

import filecmp
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from trainprobe.checkpoint.check import CheckResult, check_unit
from trainprobe.checkpoint.check.cross import cross_unit_evidence
from trainprobe.checkpoint.safe_io import walk_files
from trainprobe.checkpoint.units.discover import NOT_READ, Unit, discover_units
from trainprobe.conventions import MAX_LOGS, is_log_name
from trainprobe.errors import LogError, TrainprobeError, UsageError
from trainprobe.metrics import LogReport, Options, RunLog, analyze, read_logs
from trainprobe.metrics.events import CHECKPOINT_SAVE
from trainprobe.metrics.log_facts import log_facts
from trainprobe.metrics.reading import LogBudget, past_logs_why

COLLECT_VERSION = 3
_MAX_BAD_TENSORS = 20
_OPTIMIZER_NAME = re.compile(r"(?i)(^|\.)(optim\w*|exp_avg\w*|momentum_buffer|state\.\d+)(\.|$)")


def is_optimizer_state(name: str, param_name: str | None) -> bool:
    """Whether a tensor is optimizer state: the readers name its parameter, or its path says so."""
    return param_name is not None or bool(_OPTIMIZER_NAME.search(name))


def find_run_files(run_dir: str) -> tuple[list[str], list[tuple[str, str | None]]]:
    """(log files, checkpoint units as (path, problem)) under ``run_dir``; checkpoints found by content."""
    logs, units, _ = find_run_units(run_dir)
    return logs, [(u.path, u.problem) for u in units]


def find_run_units(run_dir: str) -> tuple[list[str], list[Unit], list[tuple[str, str]]]:
    """(log files, checkpoint units, (path, why) not read) under ``run_dir``: a unit is a checkpoint file or
    a directory a framework writes as one checkpoint (``checkpoint-N/``); what the walk could not open (an
    unreadable folder, a too-long path, a loop, a dangling link) is not read, never dropped."""
    root = Path(run_dir)
    if not root.exists():
        raise UsageError(f"{run_dir}: no such file or directory", hint="give the run's directory")
    if not root.is_dir():
        raise UsageError(
            f"{run_dir}: not a directory", hint="give the directory that holds the run's logs and checkpoints"
        )
    found = discover_units([str(root)])
    units = [u for u in found if u.problem is None]
    not_read = [
        (u.path, u.problem[len(NOT_READ) + 2 :])
        for u in found
        if u.problem and u.problem.startswith(NOT_READ)
    ]
    taken = {os.path.realpath(u.path) for u in units}
    inside: list[str] = []
    for u in units:
        if os.path.isdir(u.path):
            inside.append(os.path.realpath(u.path) + os.sep)
    logs: list[str] = []
    # a file of a resolved root that is no symlink is its own real path (100,000 logs: no realpath each)
    resolved = os.path.realpath(root) == str(root)
    for full in sorted(walk_files(str(root), [])):  # what it cannot open is in not_read already
        name = os.path.basename(full)
        if not is_log_name(name):
            continue
        if taken or inside:
            real = full if resolved and not os.path.islink(full) else os.path.realpath(full)
            # trainer_state.json is a log too (the Trainer's whole history so far), even inside checkpoint-N/
            if real in taken or (name != "trainer_state.json" and any(real.startswith(d) for d in inside)):
                continue
        logs.append(full)
    # The HF Trainer copies trainer_state.json (the whole log history so far) into every checkpoint-N/: read
    # only the newest, or every anomaly would be reported once per checkpoint.
    states = [p for p in logs if os.path.basename(p) == "trainer_state.json"]
    if len(states) > 1:
        newest = max(states, key=lambda p: (os.path.getmtime(p), p))
        logs = [p for p in logs if p not in states or p == newest]
    return logs, units, not_read


def step_at_wall(runs: list[RunLog], when: float) -> dict[str, Any] | None:
    """The last logged step at or before wall-clock time ``when`` (a file's mtime), in the first run with a
    wall clock that covers it."""
    for run in runs:
        if run.wall is None:
            continue
        ok = np.isfinite(run.wall)
        if not ok.any():
            continue
        wall, steps = run.wall[ok], run.steps[ok]
        if when < wall[0] - 60 or when > wall[-1] + 3600:
            continue
        i = int(np.searchsorted(wall, when, side="right")) - 1
        i = max(i, 0)
        return {"step": int(steps[i]), "run": run.name, "logged_at": float(wall[i])}
    return None


def _unit_bytes(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(f) for f in walk_files(path, []))


def _checkpoint_entry(checked: CheckResult, root: str) -> dict[str, Any]:
    """One unit as ``check`` judges it (its verdict, step and step sources, NaN/Inf by tensor, fingerprint,
    the evidence between units: the same answer ``trainprobe check`` gives), with its size and mtime."""
    path = checked.path
    try:
        mtime: float | None = os.stat(path).st_mtime
        size = _unit_bytes(path)
    except OSError:
        mtime, size = None, 0
    doc = checked.to_json()
    bad = [
        {
            **t,
            "optimizer_state": t.get("role") == "optimizer" or is_optimizer_state(t["name"], t["param_name"]),
        }
        for t in checked.nonfinite
    ]
    optimizer_bad = [t for t in bad if t["optimizer_state"]]
    doc["nonfinite"] = (
        optimizer_bad[: _MAX_BAD_TENSORS // 2]
        + [t for t in bad if not t["optimizer_state"]][: _MAX_BAD_TENSORS // 2]
    )
    doc["nonfinite_tensor_count"] = len(bad)
    doc["nonfinite_optimizer_tensor_count"] = len(optimizer_bad)
    doc["nonfinite_values"] = sum(int(t["nan"]) + int(t["posinf"]) + int(t["neginf"]) for t in bad)
    return {
        "path": path,
        "relpath": os.path.relpath(path, root),
        "bytes": size,
        "mtime": mtime,
        "check": doc,
    }


def _unit_files(path: str) -> list[tuple[str, str]]:
    """(name inside the unit, path) of every file of a unit, in name order."""
    if os.path.isfile(path):
        return [("", path)]
    return sorted((os.path.relpath(f, path), f) for f in walk_files(path, []))


def byte_identical(a: str, b: str) -> bool:
    """Whether two units hold the same files with the same bytes (compared only for units whose tensor
    fingerprints already match, so the read is paid for duplicates alone)."""
    fa, fb = _unit_files(a), _unit_files(b)
    if [n for n, _ in fa] != [n for n, _ in fb]:
        return False
    try:
        return all(
            os.path.getsize(x) == os.path.getsize(y) and filecmp.cmp(x, y, shallow=False)
            for (_, x), (_, y) in zip(fa, fb, strict=True)
        )
    except OSError:
        return False


def mark_duplicates(entries: list[dict[str, Any]]) -> None:
    """Each entry's ``identical_to`` (same tensors, by ``check``'s fingerprint) and ``byte_identical_to``
    (the same bytes too), as relpaths."""
    by_fp: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        fp = e["check"].get("fingerprint")
        if fp is not None:
            by_fp.setdefault(fp, []).append(e)
    for e in entries:
        same = [o for o in by_fp.get(e["check"].get("fingerprint") or "", []) if o is not e]
        e["identical_to"] = [o["relpath"] for o in same]
        e["byte_identical_to"] = [o["relpath"] for o in same if byte_identical(e["path"], o["path"])]


@dataclass
class LogsRead:
    """What the logs of a run dir gave: the ``logs --json`` document (None when nothing was read), the files
    skipped and why, the runs, the log's own facts and the save lines' absolute paths resolved here."""

    report: dict[str, Any] | None = None
    skipped: list[dict[str, str]] = field(default_factory=list)
    runs: list[RunLog] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    saved_paths: dict[str, str | None] = field(default_factory=dict)


def read_and_analyze(
    log_files: list[str],
    not_read: list[tuple[str, str]],
    patterns: list[re.Pattern[str]],
    options: Options,
    root: str,
) -> LogsRead:
    """Read every log file, analyse the runs they hold, and take the log's own facts
    (``trainprobe.metrics.log_facts``); what cannot be read is skipped with why, never raised."""
    out = LogsRead(skipped=[{"path": p, "why": why} for p, why in not_read])
    for f in log_files:
        try:
            got = [r for r in read_logs(Path(f), event_patterns=patterns) if len(r) >= 3 and r.columns]
        except (TrainprobeError, OSError, ValueError) as exc:
            out.skipped.append({"path": f, "why": str(exc)})
            continue
        if not got:
            out.skipped.append({"path": f, "why": "no metric rows"})
        out.runs.extend(got)
    if not out.runs:
        return out
    try:
        analysed = analyze(out.runs, options=options)
    except LogError as exc:
        out.skipped.append({"path": root, "why": str(exc)})
        return out
    out.report = analysed.to_json(series=True)
    out.facts = [f.to_json() for f in log_facts(analysed.runs)]
    out.saved_paths = _saved_paths(analysed)
    return out


def _saved_paths(report: LogReport) -> dict[str, str | None]:
    """Each absolute path the save lines name, resolved here (None where nothing is there): the same place
    through a symbolic link is no copy."""
    saved: dict[str, str | None] = {}
    for events in report.events.values():
        for e in events:
            if e.kind == CHECKPOINT_SAVE and e.path and os.path.isabs(e.path) and e.path not in saved:
                saved[e.path] = os.path.realpath(e.path) if os.path.exists(e.path) else None
    return saved


if TYPE_CHECKING:  # typing.TypedDict is 3.8+; this module also runs on the far side's Python 3.7
    from typing import TypedDict

    class CollectOptions(TypedDict, total=False):
        """The keywords of :func:`collect` and of ``trainprobe.triage.triage`` (which passes them on)."""

        threshold: float
        stall_floor_s: float
        event_patterns: Sequence[str] | None
        max_logs: int | None
        workers: int | None
        progress: Callable[[float], None] | None


def collect(
    run_dir: str,
    *,
    threshold: float = 6.0,
    stall_floor_s: float = 10.0,
    event_patterns: Sequence[str] | None = None,
    max_logs: int | None = None,
    workers: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Discover, analyse, scan and check one run directory; return the evidence as a JSON-ready dict.

    ``max_logs``: the log files read (default :data:`~trainprobe.conventions.MAX_LOGS`, 0: every one): the
    result's ``log_files``; those past it are one entry of ``logs_skipped`` (the run dir: their count).
    Checkpoints are scanned and checked in parallel (``workers`` threads; each file's own reads are threaded
    too); the logs are analysed meanwhile. ``progress`` receives fractions of the work that add up to 1.0.
    Unreadable files are part of the result, never raised; a missing directory raises UsageError."""
    started = time.perf_counter()
    try:
        patterns = [re.compile(p) for p in event_patterns or []]
    except re.error as exc:
        raise UsageError(f"--event: not a valid regular expression ({exc})") from None
    root = str(Path(run_dir).resolve()) if Path(run_dir).exists() else run_dir
    # One namespace for every path: a run dir reached through a symlink names its units under the resolved
    # root, so their relpaths (and the titles that quote them) are the same as for the real directory.
    log_files, targets, not_read = find_run_units(root)
    cap = MAX_LOGS if max_logs is None else max_logs
    log_files, past = LogBudget(cap).split(log_files)
    if past:  # one entry for them all; ``log_files`` are the files read
        not_read.append((root, past_logs_why(cap, len(past))))
    units = 1 + len(targets)
    lock = threading.Lock()

    def tick() -> None:
        if progress is not None:
            with lock:
                progress(1.0 / units)

    patterns_given = list(event_patterns or [])
    options = Options(
        threshold=threshold, stall_floor_s=stall_floor_s, event_patterns=patterns_given, max_logs=cap
    )

    def read_logs_and_analyze() -> LogsRead:
        try:
            return read_and_analyze(log_files, not_read, patterns, options, root)
        finally:
            tick()

    n = workers or min(4, (os.cpu_count() or 2))
    with ThreadPoolExecutor(max_workers=n + 1, thread_name_prefix="trainprobe-triage") as pool:
        logs_future = pool.submit(read_logs_and_analyze)

        def one(unit: Unit) -> CheckResult:
            try:
                return check_unit(unit)
            finally:
                tick()

        checked = list(pool.map(one, targets))
        logs = logs_future.result()
    cross_unit_evidence(checked)
    entries = [_checkpoint_entry(c, root) for c in checked]
    mark_duplicates(entries)
    for entry in entries:
        entry["step_at_mtime"] = (
            step_at_wall(logs.runs, entry["mtime"]) if entry["mtime"] is not None else None
        )
    return {
        "collect_version": COLLECT_VERSION,
        "run_dir": root,
        "host": socket.gethostname(),
        "log_files": log_files,
        "logs_skipped": logs.skipped,
        "logs": logs.report,
        "units": entries,
        "log_facts": logs.facts,
        "saved_paths": logs.saved_paths,
        "seconds": round(time.perf_counter() - started, 3),
    }
