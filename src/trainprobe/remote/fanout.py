"""Run one script on many targets at once: bounded concurrency, live output per target, one outcome each.

::

    from trainprobe.remote.fleet import expand_targets, load_config
    from trainprobe.remote.fanout import run_fleet

    targets = expand_targets(["ssh=node[01-16]//docker=trainer"], load_config())
    fleet = run_fleet(targets, "check.py", ["/ckpts"], parallel=32, timeout=600,
                      on_output=lambda target, stream, data: ...)
    fleet.exit_code, fleet.rows(), fleet.to_json()

Each target runs through :func:`trainprobe.remote.run` in a worker thread; at most ``parallel`` run at once,
so one slow or dead target holds one slot and never the others, and ``timeout`` applies to each target on its
own. Every target ends with an :class:`Outcome` (never an exception), in the order the targets were given.
``slurm=JOBID`` without ``@NODE`` first becomes one target per node of the job (:func:`expand_slurm_jobs`).

Exit code of a fleet (:attr:`FleetResult.exit_code`): 0 when every target ran its script to the end with exit
0; 1 when any target failed (script exit code not 0, exception, timeout, unreachable, no interpreter,
interrupted). Per-target exit codes are in the outcomes.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainprobe.errors import (
    AuthenticationError,
    InterpreterNotFoundError,
    RemoteError,
    RemoteExceptionError,
    RemoteKilledError,
    RemoteTimeoutError,
    UnreachableError,
)
from trainprobe.remote import api
from trainprobe.remote.fleet import expand_ranges
from trainprobe.remote.hops.base import Hop
from trainprobe.remote.hops.slurm import SlurmHop
from trainprobe.remote.logs import new_run_dir
from trainprobe.remote.session import Module, RunResult, hop_failure
from trainprobe.remote.target import SEPARATOR, Target, parse_target

DEFAULT_PARALLEL = 32
#: ``on_output(target, stream, data)``: ``stream`` is "stdout" or "stderr", ``data`` raw bytes as they arrive
OutputCallback = Callable[[str, str, bytes], None]

#: status words, in the order a summary lists them
STATUSES = ("ok", "failed", "exception", "timeout", "unreachable", "auth", "no-python", "killed", "error")
_STATUS_OF_ERROR: tuple[tuple[type[RemoteError], str], ...] = (
    (RemoteTimeoutError, "timeout"),
    (UnreachableError, "unreachable"),
    (AuthenticationError, "auth"),
    (InterpreterNotFoundError, "no-python"),
    (RemoteExceptionError, "exception"),
    (RemoteKilledError, "killed"),
)

#: run on the host before a ``slurm=JOBID`` hop to list the job's nodes (stdlib only)
SLURM_NODES_SCRIPT = """\
import subprocess, sys


def main():
    try:
        proc = subprocess.run(["squeue", "--noheader", "--jobs", sys.argv[1], "--format", "%T %N"],
                              capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return {"rc": 127, "out": "", "err": "squeue: command not found"}
    return {"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr}
"""


@dataclass
class Outcome:
    """How one target of a fleet ended."""

    target: str
    status: str
    exit_code: int
    duration: float = 0.0
    result: Any = None
    summary: str = ""
    error: RemoteError | None = None
    log_dir: Path | None = None
    python: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "status": self.status,
            "exit_code": self.exit_code,
            "duration": round(self.duration, 3),
            "result": self.result,
            "summary": self.summary,
            "python": self.python,
            "log_dir": str(self.log_dir) if self.log_dir else None,
            "error": None
            if self.error is None
            else {"type": type(self.error).__name__, "message": str(self.error)},
        }


@dataclass
class FleetResult:
    """Every target's outcome, in the order given, and the fleet's exit code."""

    outcomes: list[Outcome]
    duration: float = 0.0
    parallel: int = DEFAULT_PARALLEL
    log_dir: Path | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.outcomes and all(o.ok for o in self.outcomes) else 1

    def counts(self) -> dict[str, int]:
        """How many targets ended in each status (only statuses that occurred, in :data:`STATUSES` order)."""
        found = [o.status for o in self.outcomes]
        return {status: found.count(status) for status in STATUSES if status in found}

    def rows(self) -> list[dict[str, Any]]:
        """One row per target for a table: target, status, exit code, duration (s), summary."""
        return [
            {
                "target": o.target,
                "status": o.status,
                "exit": o.exit_code,
                "duration": round(o.duration, 2),
                "summary": o.summary,
            }
            for o in self.outcomes
        ]

    def summary_line(self) -> str:
        """E.g. ``50 targets: 48 ok, 1 timeout, 1 unreachable in 6.1 s``."""
        parts = ", ".join(f"{n} {status}" for status, n in self.counts().items())
        return f"{len(self.outcomes)} targets: {parts} in {self.duration:.1f} s"

    def to_json(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "duration": round(self.duration, 3),
            "parallel": self.parallel,
            "log_dir": str(self.log_dir) if self.log_dir else None,
            "counts": {"total": len(self.outcomes), **self.counts()},
            "targets": [o.to_json() for o in self.outcomes],
        }


def short_labels(targets: Sequence[str]) -> dict[str, str]:
    """A short label per target for prefixing output: the hops that differ between targets.

    ``ssh=node01//docker=trainer`` and ``ssh=node02//docker=trainer`` → ``ssh=node01`` and ``ssh=node02``.
    """
    split = [t.split(SEPARATOR) for t in targets]
    labels: dict[str, str] = {}
    for target, hops in zip(targets, split, strict=True):
        keep = [
            hop
            for i, hop in enumerate(hops)
            if len(targets) == 1 or any(len(other) <= i or other[i] != hop for other in split)
        ]
        labels[target] = SEPARATOR.join(keep) or target
    return labels


class LinePrefixer:
    """Turns live chunks from many targets into whole lines, each prefixed by its target's label.

    ``write(target, stream, data)`` can be passed as ``on_output``; complete lines go to
    ``emit(stream, line)`` (bytes, ending in a newline) under one lock, so lines of different targets never
    interleave mid-line.
    Call :meth:`flush` for a target when it ends, so a last line without a newline is not lost.
    """

    def __init__(self, targets: Sequence[str], emit: Callable[[str, bytes], None]) -> None:
        self._prefix: dict[str, bytes] = {}
        self._partial: dict[tuple[str, str], bytes] = {}
        self._emit = emit
        self._lock = threading.Lock()
        self.set_targets(targets)

    def set_targets(self, targets: Sequence[str]) -> None:
        """Relabel for the final list (pass as ``run_fleet(on_plan=...)``: a Slurm job becomes its nodes)."""
        labels = short_labels(targets)
        width = max((len(label) for label in labels.values()), default=0)
        with self._lock:
            self._prefix = {t: f"{label:<{width}} | ".encode() for t, label in labels.items()}

    def _label(self, target: str) -> bytes:
        return self._prefix.get(target) or f"{target} | ".encode()

    def write(self, target: str, stream: str, data: bytes) -> None:
        with self._lock:
            buffered = self._partial.pop((target, stream), b"") + data
            *lines, rest = buffered.split(b"\n")
            for line in lines:
                self._emit(stream, self._label(target) + line + b"\n")
            if rest:
                self._partial[(target, stream)] = rest

    def flush(self, target: str) -> None:
        with self._lock:
            for stream in ("stdout", "stderr"):
                rest = self._partial.pop((target, stream), b"")
                if rest:
                    self._emit(stream, self._label(target) + rest + b"\n")


def explain_hop_failure(target: Target, transport_log: str) -> tuple[str, str] | None:
    """``(why, what to try)`` from the innermost container/cluster hop whose tool's message is in the log
    (:func:`trainprobe.remote.session.hop_failure`, which single runs use too)."""
    error = hop_failure(str(target), transport_log)
    return None if error is None else (error.reason, error.hint or "")


def diagnose(result: RunResult) -> RunResult:
    """Replace a generic "exited before the agent started" error with the container/job hop's own reason.

    Used on every fleet outcome; the engine may call it for single runs too. Returns ``result``, changed in
    place.
    """
    if result.error is None or result.python is not None or result.log_dir is None:
        return result
    if isinstance(result.error, (RemoteTimeoutError, RemoteKilledError)):
        return result
    try:
        log = (result.log_dir / "transport.log").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return result
    result.error = hop_failure(result.target, log) or result.error
    return result


def _summary(result: RunResult) -> str:
    if result.error is not None:
        return result.error.reason + (f" — {result.error.hint}" if result.error.hint else "")
    if result.exit_code != 0:
        last = _last_line(result.stderr_path)
        return f"exit {result.exit_code}" + (f": {last}" if last else "")
    if result.result is None:
        return ""
    text = json.dumps(result.result, default=str, separators=(",", ":"))
    return text if len(text) <= 80 else text[:77] + "..."


def _last_line(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:120] if lines else ""


def outcome_of(result: RunResult) -> Outcome:
    """The fleet's view of one finished run."""
    diagnose(result)
    if result.error is None:
        status = "ok" if result.exit_code == 0 else "failed"
    else:
        status = next((s for cls, s in _STATUS_OF_ERROR if isinstance(result.error, cls)), "error")
    return Outcome(
        target=result.target,
        status=status,
        exit_code=result.exit_code,
        duration=result.duration,
        result=result.result,
        summary=_summary(result),
        error=result.error,
        log_dir=result.log_dir,
        python=result.python,
    )


def parse_squeue(job: str, rc: int, out: str, err: str) -> tuple[list[str] | None, str]:
    """(node names, "") for a running job, else (None, why) from ``squeue -h -j JOB -o '%T %N'``."""
    text = out.strip()
    if rc != 0:
        if "invalid job id" in err.lower():
            return None, f"there is no Slurm job {job} (ended long ago or never existed)"
        return None, f"squeue failed: {err.strip() or f'exit {rc}'}"
    if not text:
        return None, f"Slurm job {job} has ended"
    state, _, nodelist = text.splitlines()[0].partition(" ")
    if state != "RUNNING":
        return None, f"Slurm job {job} is {state.lower()}, not running"
    return expand_hostlist(nodelist.strip()), ""


def expand_hostlist(nodelist: str) -> list[str]:
    """Slurm's compressed host list (``gpu[01-03,07],login1``) → node names."""
    names, depth, start = [], 0, 0
    for i, ch in enumerate(nodelist + ","):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            if nodelist[start:i]:
                names.extend(expand_ranges(nodelist[start:i]))
            start = i + 1
    return names


def _slurm_split(target: Target) -> tuple[int, SlurmHop] | None:
    for index, hop in enumerate(target.hops):
        if isinstance(hop, SlurmHop) and hop.node is None:
            return index, hop
    return None


def expand_slurm_jobs(
    targets: Sequence[str], *, connect_timeout: float = 10.0, timeout: float | None = 120.0, parallel: int = 8
) -> tuple[list[str], list[Outcome]]:
    """Replace each ``slurm=JOBID`` (no node) by ``slurm=JOBID@NODE`` for every node of the job.

    The nodes are asked of Slurm (``squeue``) on the host of the hop before, through the engine like any run.
    Returns (targets, outcomes of targets whose job could not be listed: an ended job is one clear error).
    """
    parsed = [parse_target(t) for t in targets]
    jobs = {i: found for i, t in enumerate(parsed) if (found := _slurm_split(t)) is not None}
    if not jobs:
        return list(targets), []

    def nodes_of(i: int) -> tuple[list[str] | None, RunResult | None, str]:
        index, hop = jobs[i]
        before = Target(parsed[i].hops[:index]) if index else parse_target("local")
        run = api.run(before, SLURM_NODES_SCRIPT, [hop.job], timeout=timeout, connect_timeout=connect_timeout)
        if run.error is not None or not isinstance(run.result, dict):
            return None, run, ""
        nodes, why = parse_squeue(hop.job, int(run.result["rc"]), run.result["out"], run.result["err"])
        return nodes, run, why

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(parallel, len(jobs)))) as pool:
        answers = dict(zip(jobs, pool.map(nodes_of, jobs), strict=True))
    expanded: list[str] = []
    failed: list[Outcome] = []
    for i, target in enumerate(parsed):
        if i not in answers:
            expanded.append(str(target))
            continue
        nodes, run, why = answers[i]
        index, hop = jobs[i]
        if nodes is None:
            error: RemoteError
            if why or run is None:
                error = UnreachableError(str(target), why or "listing the job's nodes gave no answer")
            else:
                error = run.error or RemoteError(str(target), "listing the job's nodes gave no answer")
            duration, logs = (run.duration, run.log_dir) if run else (0.0, None)
            status = _status_for(error)
            failed.append(
                Outcome(str(target), status, 1, duration, summary=error.reason, error=error, log_dir=logs)
            )
            continue
        for node in nodes:
            hops: list[Hop] = list(target.hops)
            hops[index] = dataclasses.replace(hop, node=node)
            expanded.append(str(Target(tuple(hops))))
    return expanded, failed


def _status_for(error: RemoteError) -> str:
    return next((s for cls, s in _STATUS_OF_ERROR if isinstance(error, cls)), "error")


def run_fleet(
    targets: Sequence[str],
    script: str,
    args: Sequence[str] = (),
    *,
    parallel: int = DEFAULT_PARALLEL,
    timeout: float | None = None,
    connect_timeout: float = 10.0,
    need: Sequence[str] = (),
    on_output: OutputCallback | None = None,
    on_done: Callable[[Outcome], None] | None = None,
    on_plan: Callable[[list[str]], None] | None = None,
    log_dir: str | Path | None = None,
    cancel: threading.Event | None = None,
    modules: Sequence[Module] = (),
) -> FleetResult:
    """Run ``script`` on every target, at most ``parallel`` at once; never raises for a target's failure.

    ``timeout`` and ``connect_timeout`` apply to each target. ``on_output(target, stream, data)`` gets
    live output (from worker threads, see :class:`LinePrefixer`); ``on_done(outcome)`` is called as each
    target ends; ``on_plan(targets)`` once before any run starts, with the final list (a Slurm job
    replaced by its nodes). Each target's logs go to ``LOG_DIR/NNN-<target>/`` where LOG_DIR is
    ``log_dir`` or a new ``fleet-N`` directory under the runs directory; ``fleet.json`` there holds
    :meth:`FleetResult.to_json`. Ctrl-C (or setting ``cancel``) stops every run, killing the far sides;
    targets not yet started end as ``killed``.
    """
    if parallel < 1:
        raise ValueError("parallel must be at least 1")
    start = time.monotonic()
    cancel = cancel or threading.Event()
    order = list(dict.fromkeys(str(parse_target(t)) for t in targets))  # canonical, each once
    expanded, early = expand_slurm_jobs(order, connect_timeout=connect_timeout, parallel=parallel)
    root = Path(log_dir) if log_dir else new_run_dir(f"fleet-{len(expanded) + len(early)}")
    root.mkdir(parents=True, exist_ok=True)
    finished: dict[str, Outcome] = {o.target: o for o in early}
    if on_plan is not None:
        on_plan([*expanded, *(o.target for o in early)])
    if on_done is not None:
        for outcome in early:
            on_done(outcome)

    def one(index: int, target: str) -> Outcome:
        if cancel.is_set():
            error = RemoteKilledError(target, "interrupted before it started")
            return Outcome(target, "killed", 130, summary=error.reason, error=error)
        sink_out = (lambda data: on_output(target, "stdout", data)) if on_output else None
        sink_err = (lambda data: on_output(target, "stderr", data)) if on_output else None
        result = api.run(
            target,
            script,
            args,
            timeout=timeout,
            connect_timeout=connect_timeout,
            need=need,
            stdout=sink_out,
            stderr=sink_err,
            log_dir=root / f"{index:03d}-{parse_target(target).slug}",
            cancel=cancel,
            modules=modules,
        )
        outcome = outcome_of(result)
        if on_done is not None:
            on_done(outcome)
        return outcome

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(parallel, len(expanded))))
    futures = {pool.submit(one, i, t): t for i, t in enumerate(expanded)}
    try:
        pending = set(futures)
        while pending:  # short waits keep the main thread responsive to Ctrl-C
            _, pending = concurrent.futures.wait(pending, timeout=0.2)
    except KeyboardInterrupt:
        cancel.set()
        raise
    finally:
        pool.shutdown(wait=True)
    for future, target in futures.items():
        finished[target] = future.result()
    outcomes = [finished[t] for t in expanded] + early
    # keep the caller's order: a slurm job's nodes stand where the job was
    position = {t: i for i, t in enumerate(order)}
    outcomes.sort(key=lambda o: position.get(o.target, position.get(_job_target(o.target), len(order))))
    fleet = FleetResult(outcomes, duration=time.monotonic() - start, parallel=parallel, log_dir=root)
    (root / "fleet.json").write_text(
        json.dumps(fleet.to_json(), indent=2, default=str) + "\n", encoding="utf-8"
    )
    return fleet


def _job_target(target: str) -> str:
    """``...//slurm=5@node07//...`` → ``...//slurm=5//...`` (where the job's nodes came from)."""
    parsed = parse_target(target)
    hops = [dataclasses.replace(h, node=None) if isinstance(h, SlurmHop) else h for h in parsed.hops]
    return str(Target(tuple(hops)))


def call_fleet(
    targets: Sequence[str],
    function: Callable[..., Any],
    *args: Any,
    parallel: int = DEFAULT_PARALLEL,
    timeout: float | None = None,
    connect_timeout: float = 10.0,
    need: Sequence[str] = (),
    on_done: Callable[[Outcome], None] | None = None,
    log_dir: str | Path | None = None,
    modules: Sequence[str] = (),
    **kwargs: Any,
) -> FleetResult:
    """:func:`trainprobe.remote.call` on every target: ``function(*args, **kwargs)`` runs on each (its module
    and ``modules`` shipped, see :func:`trainprobe.remote.api.modules_for`) and each outcome's ``result`` is
    its value (or what its ``to_json()`` returns). This is how ``scan --on`` reaches a fleet."""
    argv, shipped = api.call_argv(function, args, kwargs, modules)
    return run_fleet(
        targets,
        api.CALL_DRIVER,
        argv,
        parallel=parallel,
        timeout=timeout,
        connect_timeout=connect_timeout,
        need=need,
        on_done=on_done,
        log_dir=log_dir,
        modules=shipped,
    )


def needs_fleet(targets: Sequence[str]) -> bool:
    """True when ``targets`` (from :func:`~trainprobe.remote.fleet.expand_targets`) is more than one run:
    several targets, or a ``slurm=JOBID`` that fans out to the job's nodes."""
    return len(targets) > 1 or any(_slurm_split(parse_target(t)) is not None for t in targets)
