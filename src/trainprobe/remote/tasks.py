"""Library tasks that run on a target: ``scan_on`` (``scan --on``) and ``check_on`` (``check --on``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trainprobe.errors import UsageError
from trainprobe.remote.api import call
from trainprobe.remote.target import Target

if TYPE_CHECKING:
    from trainprobe.checkpoint.scan import ScanReport


def scan_on(
    target: str | Target,
    paths: Sequence[str],
    *,
    stats: bool = False,
    verify: bool = False,
    timeout: float | None = None,
    connect_timeout: float = 10.0,
) -> ScanReport:
    """Scan checkpoints where they are: ``trainprobe.checkpoint`` is shipped to ``target`` and run there.

    The far side needs only Python and numpy (discovery picks an interpreter that has numpy); globs expand
    there
    and relative paths are relative to the remote login directory (or ``cd=``). The report is the one a local
    :func:`trainprobe.checkpoint.scan` gives. Raises the run's RemoteError if the scan could not run.
    """
    from trainprobe.checkpoint.scan import ScanReport, scan

    data = call(
        target,
        scan,
        list(paths),
        stats=stats,
        verify=verify,
        timeout=timeout,
        connect_timeout=connect_timeout,
        need=("numpy",),
    )
    return ScanReport.from_json(data)


def check_on(
    target: str | Target,
    paths: Sequence[str],
    *,
    timeout: float | None = None,
    connect_timeout: float = 10.0,
) -> dict[str, Any]:
    """``trainprobe check`` where the checkpoints are: the ``check --json`` document a local
    :func:`trainprobe.checkpoint.check.check_paths` gives, computed on ``target`` (Python and numpy only)."""
    from trainprobe.checkpoint.check import check_paths_json

    data = call(
        target,
        check_paths_json,
        list(paths),
        timeout=timeout,
        connect_timeout=connect_timeout,
        need=("numpy",),
    )
    if not isinstance(data, dict) or "checkpoints" not in data:
        raise UsageError(f"{target}: the remote check returned no report")
    return data
