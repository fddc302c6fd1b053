"""``triage``: the whole diagnosis of one run directory here (on a target: ``trainprobe.tasks.triage_on``)."""

from __future__ import annotations

from collections.abc import Callable

from trainprobe.triage.collect import collect
from trainprobe.triage.conclude import conclude
from trainprobe.triage.model import TriageReport


def triage(
    run_dir: str,
    *,
    threshold: float = 6.0,
    stall_floor_s: float = 10.0,
    event_patterns: list[str] | None = None,
    workers: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> TriageReport:
    """Diagnose the run in ``run_dir``: find its logs and checkpoint units, run the log detectors, check every
    unit, match the log's saves to the units, join them on one timeline and give the four answers: what is
    broken where, what the logs show, what caused what, which unit to resume from.

    ``threshold`` and ``stall_floor_s`` are the log detectors' spike threshold and minimum stall (seconds).
    Where the files are on another machine: :func:`trainprobe.tasks.triage_on` (the discovery, checks and
    log analysis run there; only Python and numpy needed there; the conclusions are drawn here).
    """
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
