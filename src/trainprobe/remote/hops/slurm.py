"""``slurm=JOBID[@NODE]``: a step inside a running Slurm job, ``srun --jobid=JOBID --overlap ...``.

The step is one task on one node (``--nodes=1 --ntasks=1``); ``@NODE`` picks the node (``--nodelist``),
without it Slurm takes the job's first. ``--overlap`` shares the resources the job already holds, so the step
starts at once next to the training processes instead of queueing behind them. ``--unbuffered``: without it
slurmstepd forwards a task's output only up to the last newline, which would hold back binary frames (measured
with Slurm 22.05); it does not allocate a terminal. In a fleet, ``slurm=JOBID`` without a node fans out to
every node of the job (see :func:`trainprobe.remote.fanout.expand_slurm_jobs`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainprobe.errors import TargetSyntaxError
from trainprobe.remote.hops.base import EnteringHop, check_name, need_value, no_options

_FAILURES = (
    ("has expired", "Slurm job {job} has ended", "squeue --me lists your running jobs"),
    (
        "invalid job id",
        "there is no Slurm job {job} (ended long ago or never existed)",
        "squeue --me lists them",
    ),
    (
        "requested node configuration is not available",
        "node {node} is not part of job {job}",
        "squeue -j {job}",
    ),
    ("job/step already completing or completed", "Slurm job {job} is ending", "squeue --me lists your jobs"),
    (
        "unable to contact slurm controller",
        "the Slurm controller is not reachable",
        "is slurmctld up? (sinfo)",
    ),
    ("access/permission denied", "not allowed to start steps in job {job}", "run as the job's owner"),
)


@dataclass(frozen=True)
class SlurmHop(EnteringHop, kind="slurm", program="srun"):
    failures = _FAILURES
    job: str
    node: str | None = None

    @classmethod
    def parse(cls, value: str | None, options: Mapping[str, str]) -> SlurmHop:
        no_options(cls.kind, options)
        text = need_value(cls.kind, value, "slurm=123456 or slurm=123456@node07")
        job, at, node = text.partition("@")
        # a job id, an array task (123_4) or a heterogeneous component (123+1)
        if not job or not job.replace("_", "").replace("+", "").isdigit():
            raise TargetSyntaxError("", f"slurm={text}: {job!r} is not a Slurm job id (e.g. slurm=123456)")
        if at:
            check_name(cls.kind, need_value(cls.kind, node, "slurm=123456@node07"), "node name")
        return cls(job=job, node=node or None)

    def spec(self) -> str:
        return f"slurm={self.job}" + (f"@{self.node}" if self.node else "")

    def wrap(self, inner: Sequence[str]) -> list[str]:
        node = [f"--nodelist={self.node}"] if self.node else []
        return [
            "srun", f"--jobid={self.job}", "--overlap", "--nodes=1", "--ntasks=1", *node,
            "--unbuffered", "--quiet", "--", *inner,
        ]  # fmt: skip

    def failure_values(self) -> Mapping[str, object]:
        return {"job": self.job, "node": self.node or "(first)"}
