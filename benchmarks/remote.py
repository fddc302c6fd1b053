"""Remote engine overhead against raw ssh, in one run against a loopback sshd this script starts and stops.

Baseline: ``ssh host python3 -c pass`` (a fresh connection each time). Measured:

- ``trainprobe run TARGET noop.py`` (the CLI, a new process each time) cold — every call opens a fresh
  connection (and leaves a ControlMaster behind, as a first call does) — and with connection reuse (the
  ControlMaster of an earlier call is up).
- ``remote.run`` in a new process each time (``python -c``: the library's own fast path, what the CLI calls),
  cold and reused.
- The same through the Python API in this one process, for reference.

Goals: cold ≤ 1.3× raw ssh; reused ≤ 0.5× raw ssh. Besides wall time, the CPU of both sides per call is
reported (this process's children, sshd and everything under it, each in a cgroup of its own): on a shared
machine wall times move with everybody else's load. Needs root (it adds a test user, as the test fixture
does).

    .venv/bin/python benchmarks/remote.py [--repeat 10]

Each scenario is a function that prepares one call; ``SCENARIOS`` lists them, so a new section (e.g. fan-out)
is one more function and one more line.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _cgroup_cpu import CpuGroup  # noqa: E402
from fixtures.sshd import SshServer, make_setup, remove_setup  # noqa: E402

TRAINPROBE = str(Path(sys.executable).with_name("trainprobe"))
SHELL = "bash"


@dataclass
class Bench:
    server: SshServer
    noop: Path
    repeat: int
    scratch: Path

    @property
    def config(self) -> str:
        return str(self.server.setup.ssh_config)

    def env(self, control: str) -> dict[str, str]:
        return {**os.environ, "TRAINPROBE_SSH_CONFIG": self.config, "TRAINPROBE_CONTROL_DIR": control}


Call = Callable[[], None]


def stop_masters(bench: Bench, control: Path) -> None:
    for sock in control.glob("*"):
        stop = ["ssh", "-F", bench.config, "-o", f"ControlPath={sock}", "-O", "exit", "x"]
        subprocess.run(stop, capture_output=True)


def raw_ssh_cold(bench: Bench) -> Call:
    user = bench.server.setup.users[SHELL]
    argv = [
        "ssh",
        "-F",
        bench.config,
        "-p",
        str(bench.server.port),
        f"{user}@{bench.server.host}",
        "python3 -c pass",
    ]
    return lambda: subprocess.run(argv, check=True) and None


LIBRARY_RUN = (
    "import sys\nfrom trainprobe import remote\nsys.exit(remote.run(sys.argv[1], sys.argv[2]).exit_code)\n"
)


def command(bench: Bench, lean: bool) -> list[str]:
    """``trainprobe run -q TARGET noop.py``, or ``remote.run`` from a fresh ``python -c``."""
    if lean:
        return [sys.executable, "-c", LIBRARY_RUN, bench.server.target(SHELL), str(bench.noop)]
    return [TRAINPROBE, "run", "-q", bench.server.target(SHELL), str(bench.noop)]


class Cold:
    """A fresh connection every call, which leaves a ControlMaster behind as a first call does; the master
    is stopped after the call (``after``, not timed: nobody waits for that)."""

    def __init__(self, bench: Bench, lean: bool) -> None:
        self.bench, self.lean = bench, lean
        self.control = Path()

    def __call__(self) -> None:
        self.control = Path(tempfile.mkdtemp(prefix="tpb-", dir=self.bench.scratch))
        subprocess.run(command(self.bench, self.lean), check=True, env=self.bench.env(str(self.control)))

    def after(self) -> None:
        stop_masters(self.bench, self.control)


def cold(bench: Bench, *, lean: bool = False) -> Call:
    return Cold(bench, lean)


def reused(bench: Bench, *, lean: bool = False) -> Call:
    control = Path(tempfile.mkdtemp(prefix="tpb-", dir=bench.scratch))
    argv = command(bench, lean)
    return lambda: subprocess.run(argv, check=True, env=bench.env(str(control))) and None


def api(bench: Bench, *, reuse: bool) -> Call:
    from trainprobe import remote

    control = str(Path(tempfile.mkdtemp(prefix="tpb-", dir=bench.scratch))) if reuse else ""

    def once() -> None:
        os.environ["TRAINPROBE_CONTROL_DIR"] = control
        remote.run(bench.server.target(SHELL), bench.noop).raise_for_error()

    return once


class ApiNewMaster(Cold):
    """``remote.run`` in this process with a fresh control directory: the connection and its master start."""

    def __call__(self) -> None:
        from trainprobe import remote

        self.control = Path(tempfile.mkdtemp(prefix="tpb-", dir=self.bench.scratch))
        os.environ["TRAINPROBE_CONTROL_DIR"] = str(self.control)
        remote.run(self.bench.server.target(SHELL), self.bench.noop).raise_for_error()


@dataclass
class Scenario:
    name: str
    prepare: Callable[[Bench], Call]
    goal: float | None = None  # as a multiple of the baseline


BASELINE = Scenario("raw: ssh host python3 -c pass", raw_ssh_cold)
SCENARIOS = [
    Scenario("trainprobe run (CLI), cold", cold, 1.3),
    Scenario("trainprobe run (CLI), connection reused", reused, 0.5),
    Scenario("remote.run (new process), cold", lambda b: cold(b, lean=True), 1.3),
    Scenario("remote.run (new process), connection reused", lambda b: reused(b, lean=True), 0.5),
    Scenario("remote.run (API), fresh connection, no master", lambda b: api(b, reuse=False)),
    Scenario("remote.run (API), fresh connection, new master", lambda b: ApiNewMaster(b, lean=False)),
    Scenario("remote.run (API), connection reused", lambda b: api(b, reuse=True)),
]


def measure(
    bench: Bench, scenarios: list[Scenario], groups: tuple[CpuGroup, CpuGroup]
) -> list[tuple[float, float]]:
    """(median seconds, median CPU seconds of both sides) per call of each scenario. Rounds interleave the
    scenarios (one call each per round), so load from anything else on the machine falls on all of them
    alike; one warm-up round first."""
    calls = [scenario.prepare(bench) for scenario in scenarios]
    samples: list[list[tuple[float, float]]] = [[] for _ in calls]

    def cpu() -> float:
        return sum(group.seconds() for group in groups)

    for round_ in range(bench.repeat + 1):
        for call, taken in zip(calls, samples, strict=True):
            cpu_before, start = cpu(), time.perf_counter()
            call()
            if round_:
                taken.append((time.perf_counter() - start, cpu() - cpu_before))
            getattr(call, "after", lambda: None)()
    return [
        (statistics.median(t for t, _ in taken), statistics.median(c for _, c in taken)) for taken in samples
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=10, help="timed calls per scenario (median reported)")
    options = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("benchmarks/remote.py needs root (it adds a test user and starts sshd)")
    # An installed package carries .pyc files; an editable checkout under PYTHONDONTWRITEBYTECODE=1 (as on
    # these machines) would otherwise compile trainprobe's source in every timed process (~10 ms each).
    compileall.compile_dir(Path(__file__).resolve().parents[1] / "src" / "trainprobe", quiet=1)
    setup = make_setup()
    workdir = Path(tempfile.mkdtemp(prefix="tpb-noop-"))
    os.environ["TRAINPROBE_RUNS_DIR"] = str(workdir / "runs")
    noop = workdir / "noop.py"
    noop.write_text("pass\n")
    bench = Bench(setup.start("127.0.0.1"), noop, options.repeat, workdir)
    local, far = CpuGroup("local"), CpuGroup("sshd")
    try:
        local.__enter__()
        far.__enter__()
        local.add(os.getpid())
        far.add(bench.server.process.pid)
        os.environ["TRAINPROBE_SSH_CONFIG"] = bench.config
        (base, base_cpu), *figures = measure(bench, [BASELINE, *SCENARIOS], (local, far))
        print(f"{'scenario':48} {'median':>9} {'× raw':>7} {'CPU':>9} {'× raw':>7} {'goal (wall)':>12}")
        print(f"{BASELINE.name:48} {base * 1000:7.1f}ms {1.0:7.2f} {base_cpu * 1000:7.1f}ms {1.0:7.2f}")
        for scenario, (seconds, cpu) in zip(SCENARIOS, figures, strict=True):
            ratio = seconds / base
            goal = "" if scenario.goal is None else f"≤{scenario.goal:g}"
            verdict = "" if scenario.goal is None else (" ok" if ratio <= scenario.goal else " MISSED")
            print(f"{scenario.name:48} {seconds * 1000:7.1f}ms {ratio:7.2f} {cpu * 1000:7.1f}ms "
                  f"{cpu / base_cpu:7.2f} {goal:>7}{verdict}")  # fmt: skip
    finally:
        far.__exit__()
        local.__exit__()
        for control in workdir.glob("tpb-*"):
            stop_masters(bench, control)
        remove_setup(setup)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
