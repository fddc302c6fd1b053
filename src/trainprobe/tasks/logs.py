"""``logs`` where the logs are (``logs --on``): :func:`trainprobe.metrics.analyze` run on a target or a fleet.

``trainprobe.metrics`` (stdlib + numpy) is shipped; the far side needs only Python and numpy. Paths (and
``Options.checkpoints``) are paths there, relative to the remote login directory (or ``cd=``); ``~`` and
``$HOME`` are the home of the user the analysis runs as there. The far side
answers with every value of each run it read (:meth:`~trainprobe.metrics.LogReport.to_json` with
``data=True``, zlib-compressed: a fraction of the log's size), so the :class:`~trainprobe.metrics.LogReport`
rebuilt here is the one a local analysis gives: the same terminal report, JSON, ``--html`` and ``--png``. The
engine keeps that answer in full in the run's log directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from trainprobe.tasks.remote_call import FleetReports, RemoteTask

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing_extensions import Unpack

    from trainprobe.metrics import LogReport, Options
    from trainprobe.remote.target import Target
    from trainprobe.tasks.remote_call import FleetLimits, Limits


def logs_task() -> RemoteTask[LogReport]:
    """The log analysis as a task (built on call: importing trainprobe.metrics costs numpy's import)."""
    from trainprobe.metrics.analyze import LogReport, analyze_json

    return RemoteTask("logs", analyze_json, LogReport.from_json, far_paths=("0", "1.checkpoints"))


def _options(options: Options | None) -> dict[str, object]:
    from trainprobe.metrics import Options

    return (options or Options()).to_json()


def logs_on(
    target: str | Target,
    paths: Sequence[str | Path],
    *,
    options: Options | None = None,
    **limits: Unpack[Limits],
) -> LogReport:
    """:func:`trainprobe.metrics.analyze` of ``paths`` on ``target``: the report a local analysis gives.
    A trainprobe error there (a log that is not there: LogError) is raised here as that error; any other
    failure of the run as its RemoteError."""
    return logs_task().on(target, [str(p) for p in paths], _options(options), **limits)


def logs_on_fleet(
    targets: Sequence[str | Target],
    paths: Sequence[str | Path],
    *,
    options: Options | None = None,
    **fleet: Unpack[FleetLimits],
) -> FleetReports[LogReport]:
    """:func:`logs_on` on every target of a fleet (the same paths on each): each outcome, and each target's
    LogReport."""
    return logs_task().on_fleet(targets, [str(p) for p in paths], _options(options), **fleet)
