"""Fan-out to 1, 50 and 200 loopback sshd targets in one run; the baseline is the single target.

Goals: 50 targets ≤ 3× one target, 200 targets ≤ 8× one target (wall time of ``run_fleet`` with the default
``--parallel 32``), measured twice: cold (every target opens a fresh ssh connection) and with connection reuse
(OpenSSH ControlMaster sockets already up, as for a second command against the same fleet).

The targets are real sshd processes on 127.0.1.1 … 127.0.1.200 (16 listen addresses per sshd, OpenSSH's
limit), reached as a user whose login shell is dash, made by the test suite's sshd fixture code. Needs root.

    .venv/bin/python benchmarks/remote_fanout.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.sshd import SSHD, make_setup, remove_setup  # noqa: E402
from trainprobe.remote.fanout import run_fleet  # noqa: E402

SIZES = (1, 50, 200)
GOALS = {50: 3.0, 200: 8.0}
NOOP = "def main():\n    return 0\n"
PARALLEL = 32  # run_fleet's default
PER_SSHD = 16  # OpenSSH listens on at most 16 addresses per process


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.1.1", 0))
        return int(sock.getsockname()[1])


def start_sshds(sshd_config: Path, port: int, count: int, logdir: Path) -> list[subprocess.Popen[bytes]]:
    procs = []
    for first in range(1, count + 1, PER_SSHD):
        listen = []
        for n in range(first, min(first + PER_SSHD, count + 1)):
            listen += ["-o", f"ListenAddress=127.0.1.{n}:{port}"]
        procs.append(
            subprocess.Popen(
                [SSHD, "-D", "-f", str(sshd_config), *listen, "-E", str(logdir / f"sshd-{first}.log")],
                stdin=subprocess.DEVNULL,
            )
        )
    deadline = time.monotonic() + 20
    for n in range(1, count + 1):
        while True:
            with socket.socket() as sock:
                if sock.connect_ex((f"127.0.1.{n}", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd on 127.0.1.{n}:{port} did not come up")
            time.sleep(0.02)
    return procs


#: CPU seconds this process and its children (the ssh clients) spent per target: (mode, targets) -> samples
LOCAL_CPU: dict[tuple[str, int], list[float]] = {}


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed_fleet(targets: list[str], mode: str = "warm-up") -> float:
    cpu = cpu_seconds()
    start = time.perf_counter()
    fleet = run_fleet(targets, NOOP, timeout=120, connect_timeout=30)
    elapsed = time.perf_counter() - start
    LOCAL_CPU.setdefault((mode, len(targets)), []).append((cpu_seconds() - cpu) / len(targets))
    if fleet.exit_code != 0:
        raise RuntimeError(f"fan-out failed: {fleet.summary_line()}: {fleet.outcomes[0].summary}")
    return elapsed


def timed_raw_ssh(ssh_config: Path, destinations: list[tuple[str, int]], control: Path | None) -> float:
    """The baseline: plain ``ssh host python3 -c pass`` to every destination, 32 at a time."""
    mux = ["-o", "ControlMaster=auto", "-o", f"ControlPath={control}/raw-%C", "-o", "ControlPersist=300"]

    def one(destination: tuple[str, int]) -> int:
        host, port = destination
        argv = [
            "ssh",
            "-F",
            str(ssh_config),
            *(mux if control else []),
            "-p",
            str(port),
            host,
            "python3 -c pass",
        ]
        return subprocess.run(argv, capture_output=True, timeout=120).returncode

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        codes = list(pool.map(one, destinations))
    elapsed = time.perf_counter() - start
    if any(codes):
        raise RuntimeError(f"raw ssh failed: exit codes {sorted(set(codes))}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the median is reported")
    opts = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (it starts sshd and adds test users)")

    setup = make_setup()
    work = Path(tempfile.mkdtemp(prefix="tp-fanout-bench-"))
    control = Path(tempfile.mkdtemp(prefix="tpcm-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        port = free_port()
        procs = start_sshds(setup.sshd_config, port, max(SIZES), work)
        os.environ["TRAINPROBE_SSH_CONFIG"] = str(setup.ssh_config)
        os.environ["TRAINPROBE_RUNS_DIR"] = str(work / "runs")
        user = setup.users["dash"]
        targets = [f"ssh={user}@127.0.1.{n}:{port}" for n in range(1, max(SIZES) + 1)]
        destinations = [(f"{user}@127.0.1.{n}", port) for n in range(1, max(SIZES) + 1)]

        def median(measure: Callable[[int], float]) -> dict[int, float]:
            return {n: statistics.median(measure(n) for _ in range(opts.repeat)) for n in SIZES}

        os.environ["TRAINPROBE_CONTROL_DIR"] = ""  # cold: no connection reuse
        raw_cold = median(lambda n: timed_raw_ssh(setup.ssh_config, destinations[:n], None))
        cold = median(lambda n: timed_fleet(targets[:n], "cold"))
        os.environ["TRAINPROBE_CONTROL_DIR"] = str(control)
        timed_fleet(targets)  # bring every ControlMaster up
        timed_raw_ssh(setup.ssh_config, destinations, control)
        raw_reused = median(lambda n: timed_raw_ssh(setup.ssh_config, destinations[:n], control))
        reused = median(lambda n: timed_fleet(targets[:n], "reused"))

        print(
            f"fan-out of a no-op script, {PARALLEL} at a time, median of {opts.repeat}, {os.cpu_count()} CPUs"
        )
        print("(baseline: plain `ssh host python3 -c pass` to the same hosts, same concurrency)")
        print(
            f"{'targets':>7} | {'raw ssh':>8} {'trainprobe':>10} {'× one':>6} | "
            f"{'raw mux':>8} {'reused':>8} {'× one':>6} | goal"
        )
        for n in SIZES:
            x_cold, x_reused = cold[n] / cold[1], reused[n] / reused[1]
            goal = "baseline"
            if n in GOALS:
                verdict = ["met" if x <= GOALS[n] else "MISSED" for x in (x_cold, x_reused)]
                goal = f"≤ {GOALS[n]:g}× one: cold {verdict[0]}, reused {verdict[1]}"
            print(
                f"{n:>7} | {raw_cold[n]:>7.2f}s {cold[n]:>9.2f}s {x_cold:>5.1f}× | "
                f"{raw_reused[n]:>7.2f}s {reused[n]:>7.2f}s {x_reused:>5.1f}× | {goal}"
            )
        cpu = {mode: statistics.median(LOCAL_CPU[(mode, max(SIZES))]) * 1000 for mode in ("cold", "reused")}
        print(
            f"local side per target ({max(SIZES)} targets): {cpu['cold']:.0f} ms CPU cold, "
            f"{cpu['reused']:.0f} ms reused (trainprobe and its ssh clients); "
            "the targets' sshd, login shells and Pythons share these CPUs"
        )
    finally:
        for sock in control.glob("*"):
            subprocess.run(
                ["ssh", "-F", str(setup.ssh_config), "-o", f"ControlPath={sock}", "-O", "exit", "x"],
                capture_output=True,
                timeout=10,
            )
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(10)
        remove_setup(setup)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(control, ignore_errors=True)


if __name__ == "__main__":
    main()
