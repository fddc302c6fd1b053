"""``triage``: the whole diagnosis of one run directory here (on a target: ``trainprobe.tasks.triage_on``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainprobe.triage.collect import collect
from trainprobe.triage.conclude import conclude
from trainprobe.triage.model import TriageReport

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from trainprobe.triage.collect import CollectOptions


def triage(run_dir: str, **options: Unpack[CollectOptions]) -> TriageReport:
    """Diagnose the run in ``run_dir``: find its logs and checkpoint units, run the log detectors, check every
    unit, match the log's saves to the units, join them on one timeline and give the four answers: what is
    broken where, what the logs show, what caused what, which unit to resume from.

    ``options`` (:class:`~trainprobe.triage.collect.CollectOptions`): ``threshold`` and ``stall_floor_s``,
    the log detectors' spike threshold (default 6) and minimum stall (seconds, default 10);
    ``event_patterns``, log lines that are events; ``workers``, the check threads; ``progress``, called with
    fractions of the work.
    Where the files are on another machine: :func:`trainprobe.tasks.triage_on` (the discovery, checks and
    log analysis run there; only Python and numpy needed there; the conclusions are drawn here).
    """
    return conclude(collect(run_dir, **options))
