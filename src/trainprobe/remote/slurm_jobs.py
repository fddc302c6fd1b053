"""A ``slurm=JOBID`` hop without ``@NODE`` in a fleet becomes one target per node of the running job.

The nodes are asked of Slurm (``squeue``) on the host of the hop before, through the engine like any run;
:func:`parse_squeue` and :func:`expand_hostlist` read its answer (pure functions).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence

from trainprobe.errors import RemoteError, UnreachableError
from trainprobe.remote import api
from trainprobe.remote._record import replace
from trainprobe.remote.fleet import expand_ranges
from trainprobe.remote.fleet_result import Outcome, status_of
from trainprobe.remote.hops.slurm import SlurmHop
from trainprobe.remote.session import CONNECT_TIMEOUT_S, RunResult
from trainprobe.remote.target import Target, parse_target

#: run on the host before a ``slurm=JOBID`` hop to list the job's nodes (stdlib only)
SLURM_NODES_SCRIPT = """\
import subprocess, sys


def main():
    try:
        proc = subprocess.run(["squeue", "--noheader", "--jobs", sys.argv[1], "--format", "%T %N"],
                              capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return {"rc": 127, "out": "", "err": "squeue: command not found"}
    return {"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr}
"""


def parse_squeue(job: str, rc: int, out: str, err: str) -> tuple[list[str] | None, str]:
    """(node names, "") for a running job, else (None, why) from ``squeue -h -j JOB -o '%T %N'``."""
    text = out.strip()
    if rc != 0:
        if "invalid job id" in err.lower():
            return None, f"there is no Slurm job {job} (ended long ago or never existed)"
        return None, f"squeue failed: {err.strip() or f'exit {rc}'}"
    if not text:
        return None, f"Slurm job {job} has ended"
    state, _, nodelist = text.splitlines()[0].partition(" ")
    if state != "RUNNING":
        return None, f"Slurm job {job} is {state.lower()}, not running"
    return expand_hostlist(nodelist.strip()), ""


def expand_hostlist(nodelist: str) -> list[str]:
    """Slurm's compressed host list (``gpu[01-03,07],login1``) → node names."""
    names, depth, start = [], 0, 0
    for i, ch in enumerate(nodelist + ","):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            if nodelist[start:i]:
                names.extend(expand_ranges(nodelist[start:i]))
            start = i + 1
    return names


def unexpanded_job(target: Target) -> tuple[int, SlurmHop] | None:
    """(index, hop) of the first ``slurm=JOBID`` hop without a node, or None."""
    for index, hop in enumerate(target.hops):
        if isinstance(hop, SlurmHop) and hop.node is None:
            return index, hop
    return None


def job_of(target: Target) -> Target:
    """``...//slurm=5@node07//...`` → ``...//slurm=5//...`` (where the job's nodes came from)."""
    return Target(tuple(replace(h, node=None) if isinstance(h, SlurmHop) else h for h in target.hops))


def expand_slurm_jobs(
    targets: Sequence[Target],
    *,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    timeout: float | None = 120.0,
    parallel: int = 8,
) -> tuple[list[Target], list[Outcome]]:
    """Replace each ``slurm=JOBID`` (no node) by ``slurm=JOBID@NODE`` for every node of the job.

    Returns (targets, outcomes of targets whose job could not be listed: an ended job is one clear error).
    """
    jobs = {i: found for i, t in enumerate(targets) if (found := unexpanded_job(t)) is not None}
    if not jobs:
        return list(targets), []

    def nodes_of(i: int) -> tuple[list[str] | None, RunResult | None, str]:
        index, hop = jobs[i]
        before = Target(targets[i].hops[:index]) if index else parse_target("local")
        run = api.run(before, SLURM_NODES_SCRIPT, [hop.job], timeout=timeout, connect_timeout=connect_timeout)
        if run.error is not None or not isinstance(run.result, dict):
            return None, run, ""
        nodes, why = parse_squeue(hop.job, int(run.result["rc"]), run.result["out"], run.result["err"])
        return nodes, run, why

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(parallel, len(jobs)))) as pool:
        answers = dict(zip(jobs, pool.map(nodes_of, jobs), strict=True))
    expanded: list[Target] = []
    failed: list[Outcome] = []
    for i, target in enumerate(targets):
        if i not in answers:
            expanded.append(target)
            continue
        nodes, run, why = answers[i]
        index, hop = jobs[i]
        if nodes is None:
            error: RemoteError
            hint = "check the job id (squeue -j JOBID) and that Slurm answers there"
            silent = "listing the job's nodes gave no answer"
            if why or run is None:
                error = UnreachableError(str(target), why or silent, hint=hint)
            else:
                error = run.error or RemoteError(str(target), silent, hint=hint)
            duration, logs = (run.duration, run.log_dir) if run else (0.0, None)
            failed.append(
                Outcome(
                    str(target),
                    status_of(error),
                    1,
                    duration,
                    summary=error.reason,
                    error=error,
                    log_dir=logs,
                )
            )
            continue
        for node in nodes:
            hops = list(target.hops)
            hops[index] = replace(hop, node=node)
            expanded.append(Target(tuple(hops)))
    return expanded, failed
