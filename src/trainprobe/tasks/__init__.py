"""Run a library function where the files are: on a target or a fleet, through the remote engine.

::

    from trainprobe.tasks import scan_on, check_on, scan_on_fleet

    report = scan_on("ssh=gpu07//docker=trainer", ["/ckpts/*.safetensors"], stats=True)   # a ScanReport
    fleet = scan_on_fleet(["ssh=node[01-16]"], ["/ckpts"])   # fleet.fleet (FleetResult), fleet.reports
    one = scan_sharded(["ssh=node[01-16]"], "/local/ckpt/step_4000")  # one unit, each node its files
    verdict = check_sharded(["ssh=node[01-16]"], "/local/ckpt/step_4000")  # its check, one report

A capability's "run it there" is one :class:`~trainprobe.tasks.remote_call.RemoteTask`: the function, the
library packages shipped with it, the modules the far-side interpreter needs (``numpy`` by default) and how
the returned JSON becomes the local report type. This package joins the engine (:mod:`trainprobe.remote`,
which knows no capability) and the capabilities (which know no engine).
"""

from __future__ import annotations

from trainprobe.tasks.checkpoints import (
    check_on,
    check_on_fleet,
    check_task,
    scan_on,
    scan_on_fleet,
    scan_task,
)
from trainprobe.tasks.remote_call import FleetReports, RemoteTask
from trainprobe.tasks.sharded import ShareProgress, check_sharded, scan_sharded

__all__ = [
    "FleetReports", "RemoteTask", "ShareProgress", "check_on", "check_on_fleet", "check_sharded",
    "check_task", "scan_on", "scan_on_fleet", "scan_sharded", "scan_task",
]  # fmt: skip
