"""``scan`` and ``check`` where the checkpoints are (``scan --on``, ``check --on``).

``trainprobe.checkpoint`` (stdlib + numpy) is shipped; the far side needs only Python and numpy. Globs expand
there, relative paths are relative to the remote login directory (or ``cd=``), and ``~``, ``~/x``, ``$HOME/x``
are the home of the user the scan runs as there. Each report is the one the
local function gives: a :class:`~trainprobe.checkpoint.scanning.report.ScanReport`, the ``check --json``
document.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainprobe.tasks.remote_call import FleetReports, RemoteTask, document_with

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing_extensions import Unpack

    from trainprobe.checkpoint.scanning.report import ScanReport
    from trainprobe.remote.target import Target
    from trainprobe.tasks.remote_call import FleetLimits, Limits


def scan_task() -> RemoteTask[ScanReport]:
    """The scan as a task (built on call: importing trainprobe.checkpoint costs numpy's import)."""
    from trainprobe.checkpoint.scanning.report import ScanReport
    from trainprobe.checkpoint.scanning.run import scan

    return RemoteTask("scan", scan, ScanReport.from_json, far_paths=("0",))


def check_task() -> RemoteTask[dict[str, Any]]:
    """The check as a task; its report is the ``check --json`` document."""
    from trainprobe.checkpoint.check import check_paths_json

    return RemoteTask("check", check_paths_json, document_with("units"), far_paths=("0",))


def scan_on(
    target: str | Target,
    paths: Sequence[str],
    *,
    stats: bool = False,
    verify: bool = False,
    **limits: Unpack[Limits],
) -> ScanReport:
    """:func:`trainprobe.checkpoint.scan` on ``target``; the report a local scan gives. Raises the run's
    RemoteError if the scan could not run."""
    return scan_task().on(target, list(paths), stats=stats, verify=verify, **limits)


def scan_on_fleet(
    targets: Sequence[str | Target],
    paths: Sequence[str],
    *,
    stats: bool = False,
    verify: bool = False,
    **fleet: Unpack[FleetLimits],
) -> FleetReports[ScanReport]:
    """:func:`scan_on` on every target of a fleet: each outcome, and each target's ScanReport."""
    return scan_task().on_fleet(targets, list(paths), stats=stats, verify=verify, **fleet)


def check_on(target: str | Target, paths: Sequence[str], **limits: Unpack[Limits]) -> dict[str, Any]:
    """``trainprobe check`` where the checkpoints are: the ``check --json`` document a local
    :func:`trainprobe.checkpoint.check.check_paths` gives, computed on ``target``."""
    return check_task().on(target, list(paths), **limits)


def check_on_fleet(
    targets: Sequence[str | Target], paths: Sequence[str], **fleet: Unpack[FleetLimits]
) -> FleetReports[dict[str, Any]]:
    """:func:`check_on` on every target of a fleet: each outcome, and each target's check document."""
    return check_task().on_fleet(targets, list(paths), **fleet)
