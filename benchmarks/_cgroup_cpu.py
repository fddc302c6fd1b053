"""CPU time of a group of processes, from a cgroup-v1 ``cpuacct`` group of their own (or cgroup v2).

On a shared machine wall times move with everybody else's load; the CPU time the processes themselves used
does much less. ``with CpuGroup("name") as group: group.add(pid)``; children of added processes join it by
themselves; ``group.seconds()`` is the CPU time used so far. Removed (its processes moved back) on exit.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

V1 = Path("/sys/fs/cgroup/cpuacct")
V2 = Path("/sys/fs/cgroup/unified")


class CpuGroup:
    def __init__(self, name: str) -> None:
        self.name = f"tpbench-{os.getpid()}-{name}"
        self.path: Path | None = None
        self.root: Path | None = None

    def __enter__(self) -> CpuGroup:
        for root in (V1, V2):
            path = root / self.name
            try:
                path.mkdir()
            except OSError:
                continue
            if (path / "cgroup.procs").exists():
                self.path, self.root = path, root
                break
        return self

    @property
    def available(self) -> bool:
        return self.path is not None

    def add(self, pid: int) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def seconds(self) -> float:
        if self.path is None:
            return float("nan")
        if (self.path / "cpuacct.usage").exists():
            return int((self.path / "cpuacct.usage").read_text()) / 1e9
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    def __exit__(self, *_: object) -> None:
        if self.path is None or self.root is None:
            return
        try:
            for pid in (self.path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (self.root / "cgroup.procs").write_text(pid + "\n")
            self.path.rmdir()
        except OSError:
            pass
