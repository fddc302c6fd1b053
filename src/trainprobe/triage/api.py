"""``triage``: the whole diagnosis of one run directory, here or on a target."""

from __future__ import annotations

from collections.abc import Callable

from trainprobe.triage.collect import collect
from trainprobe.triage.conclude import conclude
from trainprobe.triage.model import TriageReport


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
    """Diagnose the run in ``run_dir``: find its logs and checkpoint units, run the log detectors, check every
    unit, match the log's saves to the units, join them on one timeline and give the four answers: what is
    broken where, what the logs show, what caused what, which unit to resume from.

    With ``on`` (a target such as ``ssh=user@gpu01``) the discovery, checks and log analysis run where the
    files are (:func:`trainprobe.tasks.triage_on`; only Python and numpy needed there); the conclusions are
    drawn here from what comes back. ``threshold`` and ``stall_floor_s`` are the log detectors' spike
    threshold and minimum stall (seconds).
    """
    if on is not None:
        from trainprobe.tasks.triage import triage_on

        report = triage_on(
            on, run_dir, threshold=threshold, stall_floor_s=stall_floor_s, event_patterns=event_patterns,
            workers=workers, timeout=timeout, connect_timeout=connect_timeout,
        )  # fmt: skip
        if progress is not None:
            progress(1.0)
        return report
    return conclude(
        collect(
            run_dir,
            threshold=threshold,
            stall_floor_s=stall_floor_s,
            event_patterns=list(event_patterns or []),
            workers=workers,
            progress=progress,
        )
    )
