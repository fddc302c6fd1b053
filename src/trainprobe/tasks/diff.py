"""``diff`` where the checkpoints are (``diff --on``): :func:`trainprobe.checkpoint.diff.diff_paths` on a
target, or on each target of a fleet (the same two paths on each: e.g. two steps on every node).

``trainprobe.checkpoint`` (stdlib + numpy) is shipped; both units are read there, never copied. The report is
the ``diff --json`` document a local diff gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainprobe.tasks.remote_call import FleetReports, RemoteTask, document_with

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing_extensions import Unpack

    from trainprobe.remote.target import Target
    from trainprobe.tasks.remote_call import FleetLimits, Limits


def diff_task() -> RemoteTask[dict[str, Any]]:
    """The diff as a task; its report is the ``diff --json`` document."""
    from trainprobe.checkpoint.diff import diff_paths_json

    return RemoteTask("diff", diff_paths_json, document_with("tensors", "verdict"), far_paths=("0", "1"))


def diff_on(target: str | Target, a: str, b: str, **limits: Unpack[Limits]) -> dict[str, Any]:
    """``trainprobe diff A B`` where the checkpoints are: the document a local
    ``diff_paths(a, b).to_json()`` gives, computed on ``target``. A path that names no checkpoint there is
    the CheckpointError a local diff raises."""
    return diff_task().on(target, str(a), str(b), **limits)


def diff_on_fleet(
    targets: Sequence[str | Target], a: str, b: str, **fleet: Unpack[FleetLimits]
) -> FleetReports[dict[str, Any]]:
    """:func:`diff_on` on every target of a fleet: each outcome, and each target's diff document."""
    return diff_task().on_fleet(targets, str(a), str(b), **fleet)
