"""The findings of a growing log's last lines, read where the log is: what the MCP tool ``watch_tail`` does,
for Python.

::

    from trainprobe.tasks.tail import tail_on

    document = tail_on("ssh=gpu07", "/runs/3/train.log", lines=2000)   # watch --json's summary + "tail"
    later = tail_on("ssh=gpu07", "/runs/3/train.log", since_step=document["runs"][0]["last_step"])

:func:`trainprobe.metrics.follow.tail_findings` is shipped (``trainprobe.metrics``: stdlib and numpy) and
reads the log backwards from its end there, so a 500 MB log costs what its tail costs; only the document
comes back. ``watch --on`` (:func:`trainprobe.tasks.watch.watch_on`) follows a log instead, until stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainprobe.tasks.remote_call import RemoteTask

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing_extensions import Unpack

    from trainprobe.remote.target import Target
    from trainprobe.tasks.remote_call import Limits


def _tail_report(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict) or "tail" not in data:
        raise ValueError("no 'tail' in the answer")
    return data


def tail_task() -> RemoteTask[dict[str, Any]]:
    """The tail's findings as a task (built on call: importing trainprobe.metrics costs numpy's import)."""
    from trainprobe.metrics.follow import tail_findings

    return RemoteTask("tail", tail_findings, _tail_report, far_paths=("0",))


def tail_on(
    target: str | Target,
    path: str | Path,
    *,
    lines: int = 5000,
    since_step: float | None = None,
    threshold: float = 6.0,
    event_patterns: Sequence[str] = (),
    **limits: Unpack[Limits],
) -> dict[str, Any]:
    """:func:`trainprobe.metrics.follow.tail_findings` of ``path`` on ``target``: the findings of its last
    ``lines`` lines (only those after ``since_step`` when given) and the ``tail`` object saying which bytes
    were read. A trainprobe error there (no such log, not a regular file, no metric rows: LogError) is
    raised here as that error; any other failure of the run as its RemoteError."""
    return tail_task().on(
        target, str(path), lines=lines, since_step=since_step, threshold=threshold,
        event_patterns=list(event_patterns), **limits,
    )  # fmt: skip
