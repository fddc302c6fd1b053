"""Remote engine overhead against raw ssh, in one run against a loopback sshd this script starts and stops.

Baseline: ``ssh host python3 -c pass`` (a fresh connection each time). Measured:

- ``trainprobe run TARGET noop.py`` (the CLI, a new process each time) cold — every call opens a fresh
  connection (and leaves a ControlMaster behind, as a first call does) — and with connection reuse (the
  ControlMaster of an earlier call is up).
- The same through ``python -m trainprobe.remote`` (no typer/rich: what the engine itself costs per process).
- The same through the Python API (``trainprobe.remote.run`` in one process), for reference.

Goals: cold ≤ 1.3× raw ssh; reused ≤ 0.5× raw ssh. Needs root (it adds a test user, as the test fixture does).

    .venv/bin/python benchmarks/remote.py [--repeat 10]

Each scenario is a function returning seconds per call; ``SCENARIOS`` lists them, so a section (e.g. fan-out)
is one more function and one more line.
"""

from __future__ import annotations

import argparse
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

    @property
    def config(self) -> str:
        return str(self.server.setup.ssh_config)

    def env(self, control: str) -> dict[str, str]:
        return {**os.environ, "TRAINPROBE_SSH_CONFIG": self.config, "TRAINPROBE_CONTROL_DIR": control}


def timed(fn: Callable[[], None], repeat: int) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` calls (after one warm-up call)."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def stop_masters(bench: Bench, control: Path) -> None:
    for sock in control.glob("*"):
        stop = ["ssh", "-F", bench.config, "-o", f"ControlPath={sock}", "-O", "exit", "x"]
        subprocess.run(stop, capture_output=True)


def raw_ssh_cold(bench: Bench) -> float:
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
    return timed(lambda: subprocess.run(argv, check=True), bench.repeat)


def command(bench: Bench, lean: bool) -> list[str]:
    """``trainprobe run -q TARGET noop.py``, or the same through ``python -m trainprobe.remote``."""
    head = [sys.executable, "-m", "trainprobe.remote"] if lean else [TRAINPROBE, "run"]
    return [*head, "-q", bench.server.target(SHELL), str(bench.noop)]


def cold(bench: Bench, *, lean: bool = False) -> float:
    def once() -> None:
        control = Path(tempfile.mkdtemp(prefix="tpb-"))
        try:
            subprocess.run(command(bench, lean), check=True, env=bench.env(str(control)))
        finally:
            stop_masters(bench, control)
            shutil.rmtree(control, ignore_errors=True)

    return timed(once, bench.repeat)


def reused(bench: Bench, *, lean: bool = False) -> float:
    control = Path(tempfile.mkdtemp(prefix="tpb-"))
    argv = command(bench, lean)
    try:
        return timed(lambda: subprocess.run(argv, check=True, env=bench.env(str(control))), bench.repeat)
    finally:
        stop_masters(bench, control)
        shutil.rmtree(control, ignore_errors=True)


def api(bench: Bench, *, reuse: bool) -> float:
    from trainprobe import remote

    control = Path(tempfile.mkdtemp(prefix="tpb-"))
    saved = {k: os.environ.get(k) for k in ("TRAINPROBE_SSH_CONFIG", "TRAINPROBE_CONTROL_DIR")}
    os.environ["TRAINPROBE_SSH_CONFIG"] = bench.config
    os.environ["TRAINPROBE_CONTROL_DIR"] = str(control) if reuse else ""
    try:
        return timed(
            lambda: remote.run(bench.server.target(SHELL), bench.noop).raise_for_error(), bench.repeat
        )
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        stop_masters(bench, control)
        shutil.rmtree(control, ignore_errors=True)


@dataclass
class Scenario:
    name: str
    run: Callable[[Bench], float]
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=10, help="timed calls per scenario (median reported)")
    options = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("benchmarks/remote.py needs root (it adds a test user and starts sshd)")
    setup = make_setup()
    workdir = Path(tempfile.mkdtemp(prefix="tpb-noop-"))
    os.environ["TRAINPROBE_RUNS_DIR"] = str(workdir / "runs")
    noop = workdir / "noop.py"
    noop.write_text("pass\n")
    try:
        bench = Bench(setup.start("127.0.0.1"), noop, options.repeat)
        base = BASELINE.run(bench)
        print(f"{'scenario':50} {'median':>9} {'× raw':>7} {'goal':>7}")
        print(f"{BASELINE.name:50} {base * 1000:7.1f}ms {1.0:7.2f} {'':>7}")
        for scenario in SCENARIOS:
            seconds = scenario.run(bench)
            ratio = seconds / base
            goal = "" if scenario.goal is None else f"≤{scenario.goal:g}"
            verdict = "" if scenario.goal is None else (" ok" if ratio <= scenario.goal else " MISSED")
            print(f"{scenario.name:50} {seconds * 1000:7.1f}ms {ratio:7.2f} {goal:>7}{verdict}")
    finally:
        remove_setup(setup)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
