"""Run a library function where the files are: on a target or a fleet, through the remote engine.

::

    from trainprobe.tasks import scan_on, check_on, scan_on_fleet

    report = scan_on("ssh=gpu07//docker=trainer", ["/ckpts/*.safetensors"], stats=True)   # a ScanReport
    logs = logs_on("ssh=gpu07", ["/runs/3/train.log"])      # a LogReport, as a local analyze gives it
    changed = diff_on("ssh=gpu07", "/ckpt/step_1000", "/ckpt/step_2000")   # the diff --json document
    report = watch_on("ssh=gpu07", "/runs/3/train.log", print)   # follow it there until Ctrl-C
    fleet = scan_on_fleet(["ssh=node[01-16]"], ["/ckpts"])   # fleet.fleet (FleetResult), fleet.reports
    one = scan_sharded(["ssh=node[01-16]"], "/local/ckpt/step_4000")  # one unit, each node its files
    verdict = check_sharded(["ssh=node[01-16]"], "/local/ckpt/step_4000")  # its check, one report
    diagnosis = triage_on("ssh=gpu07", "/scratch/exp3")    # a TriageReport, concluded here
    tail = tail_on("ssh=gpu07", "/runs/3/train.log", lines=500)  # the watch_tail tool's findings document

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
from trainprobe.tasks.diff import diff_on, diff_on_fleet, diff_task
from trainprobe.tasks.logs import logs_on, logs_on_fleet, logs_task
from trainprobe.tasks.remote_call import FleetReports, RemoteTask, raised_far_side
from trainprobe.tasks.sharded import ShareProgress, check_sharded, scan_sharded
from trainprobe.tasks.tail import tail_on, tail_task
from trainprobe.tasks.triage import collect_on, collect_task, triage_on
from trainprobe.tasks.watch import RemoteFollower, watch_on

__all__ = [
    "FleetReports", "RemoteFollower", "RemoteTask", "ShareProgress", "check_on", "check_on_fleet",
    "check_sharded", "check_task", "collect_on", "collect_task", "diff_on", "diff_on_fleet", "diff_task",
    "logs_on", "logs_on_fleet", "logs_task", "raised_far_side", "scan_on", "scan_on_fleet", "scan_sharded",
    "scan_task", "tail_on", "tail_task", "triage_on", "watch_on",
]  # fmt: skip
