"""``triage``: the whole diagnosis of one run directory, here or on a target."""

from __future__ import annotations

import json
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
    """Run :func:`collect` on ``target``. ``trainprobe.remote.call`` ships only the called function's own
    subpackage; ``collect`` needs three (triage, checkpoint, metrics), so the modules are gathered here with
    ``modules_for`` and the call is made with the engine's own call driver."""
    from trainprobe.checkpoint.scan import scan
    from trainprobe.metrics.analyze import analyze
    from trainprobe.remote import modules_for, run
    from trainprobe.remote.api import CALL_DRIVER

    module_name, modules = modules_for(collect)
    seen = {m.name for m in modules}
    for fn in (scan, analyze):
        for m in modules_for(fn)[1]:
            if m.name not in seen:
                seen.add(m.name)
                modules.append(m)
    spec = {"module": module_name, "qualname": collect.__qualname__, "args": [run_dir], "kwargs": kwargs}
    outcome = run(
        target,
        CALL_DRIVER,
        [json.dumps(spec)],
        timeout=timeout,
        connect_timeout=connect_timeout,
        need=("numpy",),
        modules=modules,
    )
    error = outcome.error
    if isinstance(error, RemoteExceptionError) and "UsageError" in error.remote_traceback:
        raise UsageError(f"{target}: {_last_line(error.remote_traceback)}") from None
    outcome.raise_for_error()
    if outcome.exit_code or not isinstance(outcome.result, dict):
        raise RemoteError(
            outcome.target, f"the triage exited with {outcome.exit_code}; see {outcome.log_dir}"
        )
    result: dict[str, Any] = outcome.result
    return result


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else text
    return line.split(": ", 1)[1] if line.startswith("trainprobe.errors.") and ": " in line else line
