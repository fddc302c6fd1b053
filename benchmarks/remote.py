"""Remote engine overhead against raw ssh, in one run against a loopback sshd this script starts and stops.

Baseline: ``ssh host python3 -c pass`` (a fresh connection each time). Measured:

- ``trainprobe run TARGET noop.py`` (the CLI, a new process each time) cold — every call opens a fresh
  connection (and leaves a ControlMaster behind, as a first call does) — and with connection reuse (the
  ControlMaster of an earlier call is up).
- The same through ``python -m trainprobe.remote`` (no typer/rich: what the engine itself costs per process).
- The same through the Python API (``trainprobe.remote.run`` in one process), for reference.

Goals: cold ≤ 1.3× raw ssh; reused ≤ 0.5× raw ssh. Needs root (it adds a test user, as the test fixture does).

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


def command(bench: Bench, lean: bool) -> list[str]:
    """``trainprobe run -q TARGET noop.py``, or the same through ``python -m trainprobe.remote``."""
    head = [sys.executable, "-m", "trainprobe.remote"] if lean else [TRAINPROBE, "run"]
    return [*head, "-q", bench.server.target(SHELL), str(bench.noop)]


def cold(bench: Bench, *, lean: bool = False) -> Call:
    """A fresh connection every call (it leaves a ControlMaster behind, as a first call does)."""

    def once() -> None:
        control = Path(tempfile.mkdtemp(prefix="tpb-", dir=bench.scratch))
        subprocess.run(command(bench, lean), check=True, env=bench.env(str(control)))
        stop_masters(bench, control)

    return once


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


@dataclass
class Scenario:
    name: str
    prepare: Callable[[Bench], Call]
    goal: float | None = None  # as a multiple of the baseline


BASELINE = Scenario("raw: ssh host python3 -c pass", raw_ssh_cold)
SCENARIOS = [
    Scenario("trainprobe run (CLI), cold", cold, 1.3),
    Scenario("trainprobe run (CLI), connection reused", reused, 0.5),
    Scenario("python -m trainprobe.remote, cold", lambda b: cold(b, lean=True), 1.3),
    Scenario("python -m trainprobe.remote, connection reused", lambda b: reused(b, lean=True), 0.5),
    Scenario("remote.run (API), fresh connection", lambda b: api(b, reuse=False)),
    Scenario("remote.run (API), connection reused", lambda b: api(b, reuse=True)),
]


def measure(bench: Bench, scenarios: list[Scenario]) -> list[float]:
    """Median seconds per call of each scenario. Rounds interleave the scenarios (one call each per round), so
    load from anything else on the machine falls on all of them alike; one warm-up round first."""
    calls = [scenario.prepare(bench) for scenario in scenarios]
    samples: list[list[float]] = [[] for _ in calls]
    for round_ in range(bench.repeat + 1):
        for call, taken in zip(calls, samples, strict=True):
            start = time.perf_counter()
            call()
            if round_:
                taken.append(time.perf_counter() - start)
    return [statistics.median(taken) for taken in samples]


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
    try:
        os.environ["TRAINPROBE_SSH_CONFIG"] = bench.config
        base, *figures = measure(bench, [BASELINE, *SCENARIOS])
        print(f"{'scenario':50} {'median':>9} {'× raw':>7} {'goal':>7}")
        print(f"{BASELINE.name:50} {base * 1000:7.1f}ms {1.0:7.2f} {'':>7}")
        for scenario, seconds in zip(SCENARIOS, figures, strict=True):
            ratio = seconds / base
            goal = "" if scenario.goal is None else f"≤{scenario.goal:g}"
            verdict = "" if scenario.goal is None else (" ok" if ratio <= scenario.goal else " MISSED")
            print(f"{scenario.name:50} {seconds * 1000:7.1f}ms {ratio:7.2f} {goal:>7}{verdict}")
    finally:
        for control in workdir.glob("tpb-*"):
            stop_masters(bench, control)
        remove_setup(setup)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
