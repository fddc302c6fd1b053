"""Run one script on many targets at once: bounded concurrency, live output per target, one outcome each.

::

    from trainprobe.remote.fleet import expand_targets, load_config
    from trainprobe.remote.fanout import run_fleet

    targets = expand_targets(["ssh=node[01-16]//docker=trainer"], load_config())
    fleet = run_fleet(targets, "check.py", ["/ckpts"], parallel=32, timeout=600,
                      on_output=lambda target, stream, data: ...)
    fleet.exit_code, fleet.rows(), fleet.to_json()

Each target is parsed once and runs through :func:`trainprobe.remote.run` in a worker thread; at most
``parallel`` run at once, so one slow or dead target holds one slot and never the others, and ``timeout``
applies to each target on its own. Every target ends with an :class:`~.fleet_result.Outcome` (never an
exception), in the order the targets were given, whose error is the one the session explained (the hop that
failed says why). ``slurm=JOBID`` without ``@NODE`` first becomes one target per node of the job
(:mod:`.slurm_jobs`). Outcomes and the fleet's exit code: :mod:`.fleet_result`; live output line by line:
:mod:`.live_output`; what is shipped for :func:`call_fleet`: :mod:`.shipping`. ``Outcome``, ``FleetResult``
and ``LinePrefixer`` are importable from here too.
"""

from __future__ import annotations

import concurrent.futures
import json
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainprobe.errors import RemoteKilledError
from trainprobe.remote import api
from trainprobe.remote.fleet_result import DEFAULT_PARALLEL, FleetResult, Outcome, outcome_of
from trainprobe.remote.logs import new_run_dir
from trainprobe.remote.session import CONNECT_TIMEOUT_S, Module
from trainprobe.remote.slurm_jobs import expand_slurm_jobs, job_of, unexpanded_job
from trainprobe.remote.target import Target, parse_target

#: ``on_output(target, stream, data)``: ``stream`` is "stdout" or "stderr", ``data`` raw bytes as they arrive
OutputCallback = Callable[[str, str, bytes], None]


def run_fleet(
    targets: Sequence[str | Target],
    script: str,
    args: Sequence[str] = (),
    *,
    parallel: int = DEFAULT_PARALLEL,
    timeout: float | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
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
    :meth:`FleetResult.to_json`. Ctrl-C, SIGTERM or SIGHUP (or setting ``cancel``) stops every run,
    killing the far sides; targets not yet started end as ``killed``.
    """
    if parallel < 1:
        raise ValueError("parallel must be at least 1")
    api.check_seconds("timeout", timeout, optional=True)
    api.check_seconds("connect_timeout", connect_timeout, optional=False)
    start = time.monotonic()
    cancel = cancel or threading.Event()
    parsed = [t if isinstance(t, Target) else parse_target(t) for t in targets]
    order = list(dict.fromkeys(parsed))  # each once, in the order given
    expanded, early = expand_slurm_jobs(order, connect_timeout=connect_timeout, parallel=parallel)
    root = Path(log_dir) if log_dir else new_run_dir(f"fleet-{len(expanded) + len(early)}")
    root.mkdir(parents=True, exist_ok=True)
    if on_plan is not None:
        on_plan([*map(str, expanded), *(o.target for o in early)])
    if on_done is not None:
        for outcome in early:
            on_done(outcome)

    def one(index: int, target: Target) -> Outcome:
        name = str(target)
        if cancel.is_set():
            hint = "nothing ran there; run it again"
            error = RemoteKilledError(name, "interrupted before it started", hint=hint)
            return Outcome(name, "killed", 130, summary=error.reason, error=error)
        sink_out = (lambda data: on_output(name, "stdout", data)) if on_output else None
        sink_err = (lambda data: on_output(name, "stderr", data)) if on_output else None
        result = api.run(
            target, script, args, timeout=timeout, connect_timeout=connect_timeout, need=need,
            stdout=sink_out, stderr=sink_err, log_dir=root / f"{index:03d}-{target.slug}", cancel=cancel,
            modules=modules,
        )  # fmt: skip
        outcome = outcome_of(result)
        if on_done is not None:
            on_done(outcome)
        return outcome

    ran = _run_all(one, expanded, parallel, cancel)
    outcomes = _in_given_order(order, dict(zip(map(str, expanded), ran, strict=True)), expanded, early)
    fleet = FleetResult(outcomes, duration=time.monotonic() - start, parallel=parallel, log_dir=root)
    (root / "fleet.json").write_text(
        json.dumps(fleet.to_json(), indent=2, default=str) + "\n", encoding="utf-8"
    )
    return fleet


def _run_all(
    one: Callable[[int, Target], Outcome], targets: list[Target], parallel: int, cancel: threading.Event
) -> list[Outcome]:
    """``one(index, target)`` for every target in a pool of ``parallel`` threads; their outcomes in order."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(parallel, len(targets))))
    futures = [pool.submit(one, i, t) for i, t in enumerate(targets)]
    try:
        with _CancelOnSignals(cancel):
            pending = set(futures)
            while pending:  # short waits keep the main thread responsive to Ctrl-C and signals
                _, pending = concurrent.futures.wait(pending, timeout=0.2)
    except KeyboardInterrupt:
        cancel.set()
        raise
    finally:
        pool.shutdown(wait=True)
    return [future.result() for future in futures]


def _in_given_order(
    order: list[Target], ran: dict[str, Outcome], expanded: list[Target], early: list[Outcome]
) -> list[Outcome]:
    """Every outcome in the caller's order: a Slurm job's nodes stand where the job was, and the jobs that
    ended before running (``early``) where they were given."""
    finished = {o.target: o for o in early} | ran
    position = {str(t): i for i, t in enumerate(order)}
    ranked = [(position.get(str(t), position.get(str(job_of(t)), len(order))), str(t)) for t in expanded]
    ranked += [(position.get(o.target, len(order)), o.target) for o in early]
    return [finished[name] for _, name in sorted(ranked, key=lambda pair: pair[0])]


class _CancelOnSignals:
    """SIGTERM and SIGHUP cancel the fleet (every far side is killed, every outcome kept) where nobody else
    handles them, as Ctrl-C does; the workers' runs report ``killed``."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.saved: dict[int, Any] = {}

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGHUP):
                if signal.getsignal(signum) is signal.SIG_DFL:
                    self.saved[signum] = signal.signal(signum, lambda *_: self.cancel.set())

    def __exit__(self, *_: object) -> None:
        for signum, handler in self.saved.items():
            signal.signal(signum, handler)


def call_fleet(
    targets: Sequence[str | Target],
    function: Callable[..., Any],
    *args: Any,
    parallel: int = DEFAULT_PARALLEL,
    timeout: float | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    need: Sequence[str] = (),
    on_done: Callable[[Outcome], None] | None = None,
    log_dir: str | Path | None = None,
    modules: Sequence[str] = (),
    far_paths: Sequence[str] = (),
    **kwargs: Any,
) -> FleetResult:
    """:func:`trainprobe.remote.call` on every target: ``function(*args, **kwargs)`` runs on each (its module
    and ``modules`` shipped, see :func:`trainprobe.remote.shipping.modules_for`) and each outcome's ``result``
    is its value (or what its ``to_json()`` returns; ``far_paths`` as :func:`~trainprobe.remote.call` takes
    it). This is how ``scan --on`` reaches a fleet."""
    from trainprobe.remote.shipping import CALL_DRIVER, call_argv

    argv, shipped = call_argv(function, args, kwargs, modules, far_paths)
    return run_fleet(
        targets, CALL_DRIVER, argv, parallel=parallel, timeout=timeout, connect_timeout=connect_timeout,
        need=need, on_done=on_done, log_dir=log_dir, modules=shipped,
    )  # fmt: skip


def needs_fleet(targets: Sequence[str | Target]) -> bool:
    """True when ``targets`` (from :func:`~trainprobe.remote.fleet.expand_targets`) is more than one run:
    several targets, or a ``slurm=JOBID`` that fans out to the job's nodes."""
    parsed = [t if isinstance(t, Target) else parse_target(t) for t in targets]
    return len(parsed) > 1 or any(unexpanded_job(t) is not None for t in parsed)


__all__ = [ "OutputCallback", "call_fleet",
           "needs_fleet", "run_fleet"]  # fmt: skip
