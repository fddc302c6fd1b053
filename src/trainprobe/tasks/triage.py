"""``triage`` where the run is (``triage --on``, the MCP ``triage`` tool): :func:`trainprobe.triage.collect`
runs on the far side (shipped with ``trainprobe.checkpoint`` and ``trainprobe.metrics``; only Python and numpy
needed there) and the conclusions are drawn here from the JSON it returns."""

from __future__ import annotations

from typing import Any

from trainprobe.errors import RemoteExceptionError, UsageError
from trainprobe.remote.session import CONNECT_TIMEOUT_S
from trainprobe.tasks.remote_call import RemoteTask, document_with

TYPE_CHECKING = False
if TYPE_CHECKING:
    from trainprobe.remote.target import Target
    from trainprobe.triage.model import TriageReport


def collect_task() -> RemoteTask[dict[str, Any]]:
    """The far half of triage as a task; its report is :func:`~trainprobe.triage.collect.collect`'s JSON."""
    from trainprobe.triage.collect import collect

    return RemoteTask(
        "triage", collect, document_with("run_dir", "units"),
        modules=("trainprobe.checkpoint", "trainprobe.metrics"), far_paths=("0",),
    )  # fmt: skip


def collect_on(
    target: str | Target,
    run_dir: str,
    *,
    threshold: float = 6.0,
    stall_floor_s: float = 10.0,
    event_patterns: list[str] | None = None,
    max_logs: int | None = None,
    workers: int | None = None,
    timeout: float | None = 3600.0,
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> dict[str, Any]:
    """:func:`~trainprobe.triage.collect` on ``target`` (every option of triage travels with it). A usage
    error there (no such directory, a bad ``--event`` regex) is a UsageError here, naming the target."""
    try:
        return collect_task().on(
            target, run_dir, timeout=timeout, connect_timeout=connect_timeout, threshold=threshold,
            stall_floor_s=stall_floor_s, event_patterns=list(event_patterns or []), max_logs=max_logs,
            workers=workers,
        )  # fmt: skip
    except RemoteExceptionError as exc:
        if "UsageError" in exc.remote_traceback:
            raise UsageError(f"{target}: {_last_line(exc.remote_traceback)}") from None
        raise


def triage_on(target: str | Target, run_dir: str, **options: Any) -> TriageReport:
    """The whole triage of ``run_dir`` on ``target``: the report a local triage there would give, with its
    ``target`` set."""
    from trainprobe.triage.conclude import conclude

    return conclude(collect_on(target, run_dir, **options), target=str(target))


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else text
    return line.split(": ", 1)[1] if line.startswith("trainprobe.errors.") and ": " in line else line
