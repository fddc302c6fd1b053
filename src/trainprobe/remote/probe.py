"""``probe``: what is on a target — interpreters, GPUs, disk, load, running training processes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainprobe.remote.api import run
from trainprobe.remote.fanout import run_fleet
from trainprobe.remote.fleet_result import DEFAULT_PARALLEL, FleetResult, Outcome
from trainprobe.remote.session import CONNECT_TIMEOUT_S, Module, with_discovery
from trainprobe.remote.target import Target

_HERE = Path(__file__).resolve().parent
SCRIPT = _HERE / "_probe_script.py"


def _stage1() -> list[Module]:
    """The probe script asks the far side's discovery for its order: it ships as a module."""
    return with_discovery([])


def probe(
    target: str | Target,
    *,
    cuda: bool = True,
    timeout: float | None = 300.0,
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> dict[str, Any]:
    """Look around on ``target``; returns the JSON document ``trainprobe probe --json`` prints.

    Keys: ``target``, ``host``, ``user``, ``agent_python``, ``interpreters`` (each ``python``, ``version``,
    ``prefix``, ``numpy``/``torch`` versions or null, ``cuda`` and ``cuda_devices`` when torch is there and
    ``cuda`` is asked for), ``gpus`` (null without nvidia-smi), ``disks``, ``load``, ``cpus``, ``memory``,
    ``processes`` (running Pythons other than trainprobe's own: ``pid``, ``uid``, ``python``, ``cmdline``,
    ``training``), ``log_dir``. Raises the run's RemoteError.
    """
    outcome = run(
        target,
        SCRIPT,
        ["--cuda"] if cuda else [],
        timeout=timeout,
        connect_timeout=connect_timeout,
        modules=_stage1(),
    ).raise_for_error()
    report: dict[str, Any] = {"target": outcome.target, **(outcome.result or {})}
    report["log_dir"] = str(outcome.log_dir)
    return report


def probe_fleet(
    targets: Sequence[str],
    *,
    cuda: bool = True,
    parallel: int = DEFAULT_PARALLEL,
    timeout: float | None = 300.0,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    on_done: Callable[[Outcome], None] | None = None,
    log_dir: str | Path | None = None,
    cancel: threading.Event | None = None,
) -> FleetResult:
    """:func:`probe` on every target, at most ``parallel`` at once, through
    :func:`~trainprobe.remote.fanout.run_fleet` (``timeout`` and ``connect_timeout`` apply to each target).

    Never raises for a target's failure: each target ends with an outcome, and an ``ok`` one's ``result`` is
    that target's probe report (the dict :func:`probe` returns, ``target`` and ``log_dir`` included).
    """
    fleet = run_fleet(
        targets,
        str(SCRIPT),
        ["--cuda"] if cuda else [],
        parallel=parallel,
        timeout=timeout,
        connect_timeout=connect_timeout,
        modules=_stage1(),
        on_done=on_done,
        log_dir=log_dir,
        cancel=cancel,
    )
    for outcome in fleet.outcomes:
        if outcome.ok and isinstance(outcome.result, dict):
            outcome.result = {"target": outcome.target, **outcome.result, "log_dir": str(outcome.log_dir)}
    return fleet
