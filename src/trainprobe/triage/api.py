"""``triage``: the whole diagnosis of one run directory, here or on a target."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainprobe.errors import RemoteError, RemoteExceptionError, UsageError
from trainprobe.triage.collect import collect
from trainprobe.triage.conclude import TriageReport, conclude


def triage(
    run_dir: str,
    *,
    on: str | None = None,
    threshold: float = 6.0,
    stall_floor_s: float = 10.0,
    event_patterns: list[str] | None = None,
    workers: int | None = None,
    progress: Callable[[float], None] | None = None,
    timeout: float | None = 3600.0,
    connect_timeout: float = 20.0,
) -> TriageReport:
    """Diagnose the run in ``run_dir``: find its logs and checkpoints, run the log detectors, scan and check
    every checkpoint, join them on one timeline and conclude the likely cause of each anomaly and the last
    healthy checkpoint.

    With ``on`` (a target such as ``ssh=user@gpu01``) the discovery, scans, checks and log analysis run where
    the files are (only Python and numpy needed there); the conclusions are drawn here from what comes back.
    ``threshold`` and ``stall_floor_s`` are the log detectors' spike threshold and minimum stall (seconds).
    """
    kwargs: dict[str, Any] = {
        "threshold": threshold,
        "stall_floor_s": stall_floor_s,
        "event_patterns": list(event_patterns or []),
        "workers": workers,
    }
    if on is None:
        collected = collect(run_dir, progress=progress, **kwargs)
    else:
        collected = collect_on(on, run_dir, timeout=timeout, connect_timeout=connect_timeout, **kwargs)
        if progress is not None:
            progress(1.0)
    return conclude(collected, target=on)


def collect_on(
    target: str, run_dir: str, *, timeout: float | None = 3600.0, connect_timeout: float = 20.0, **kwargs: Any
) -> dict[str, Any]:
    """Run :func:`collect` on ``target``, shipping the checkpoint and metrics subpackages it uses too."""
    from trainprobe.remote import call

    try:
        result = call(
            target,
            collect,
            run_dir,
            timeout=timeout,
            connect_timeout=connect_timeout,
            need=("numpy",),
            modules=("trainprobe.checkpoint", "trainprobe.metrics"),
            **kwargs,
        )
    except RemoteExceptionError as exc:
        if "UsageError" in exc.remote_traceback:
            raise UsageError(f"{target}: {_last_line(exc.remote_traceback)}") from None
        raise
    if not isinstance(result, dict):
        raise RemoteError(target, f"the triage gave {type(result).__name__}, not a report")
    return result


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else text
    return line.split(": ", 1)[1] if line.startswith("trainprobe.errors.") and ": " in line else line
