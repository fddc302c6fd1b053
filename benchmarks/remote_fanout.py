"""Fan-out side by side with pdsh and parallel-ssh, in one run, on 50 and 1,000 loopback targets.

Same targets, same work (the far side's ``python3`` prints its host name), the same fan-out (32 at a time):

- **pdsh** (Debian's ``pdsh``, ``-R ssh``): one OpenSSH client per target, no connection reuse. The baseline.
- **parallel-ssh** (PyPI ``parallel-ssh``, libssh2 in one process with gevent), no reuse.
- **trainprobe** (``run_fleet`` in its own process, as ``trainprobe run --on`` calls it; that process,
  ``benchmarks/_fanout_worker.py``, imports nothing of the benchmark's): *cold* with no
  ControlMaster up (the first call to a fleet: each target opens its connection and leaves a master behind);
  *warm*, the next call, through those masters. *cold, no reuse* (``TRAINPROBE_CONTROL_DIR=``) for reference.

Goals (ratios to pdsh in the same run, issue 25): cold ≤ 0.9×, warm ≤ 0.35×, on a quiet machine and with
``--busy 2`` (two busy loops beside the tools, each in a session of its own as another user's work would be,
killed at the end); trainprobe's peak RSS ≤ 64 MB and it works under ``ulimit -n 1024`` (each tool runs under
that limit; peak open files are sampled from /proc). The load average is printed before and after. The
package is byte-compiled first, as an installed one is (``benchmarks/remote.py`` does the same). Besides
wall time, the CPU each tool cost is reported, client side (the tool and its ssh processes, ControlMasters
included) and server side (sshd and everything under it: login shells, Pythons), each from a cgroup of its
own: on a shared machine wall times move with everybody else's load, CPU time much less.

The targets are 127.0.X.Y: one sshd, made by the test suite's sshd fixture code, listens on the port on every
address (a firewall rule, while the benchmark runs, drops that port on every interface but loopback), and the
user's login shell is dash. Needs root; apt ``pdsh`` and the ``bench`` extra (``pip install -e '.[bench]'``).

    .venv/bin/python benchmarks/remote_fanout.py [--sizes 50,1000] [--repeat 3] [--busy 2] [--tools pdsh,cold]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _cgroup_cpu import CpuGroup  # noqa: E402
from fixtures.sshd import SshSetup, free_port, make_setup, remove_setup  # noqa: E402

PARALLEL = 32
OPEN_FILES = 1024
WORK = "import socket; print(socket.gethostname())"
SHELL = "dash"


def addresses(count: int) -> list[str]:
    """127.0.1.1, 127.0.1.2, ... 250 per /24, never 127.0.0.1 (the machine's own services live there)."""
    return [f"127.0.{1 + i // 250}.{1 + i % 250}" for i in range(count)]


# --- measuring one tool ---


@dataclass
class Sample:
    seconds: float
    rss_mb: float
    open_files: int
    ok: int
    cpu_client: float = 0.0
    cpu_server: float = 0.0


def measure(
    argv: list[str], env: dict[str, str], expect: int, count_ok: object, group: CpuGroup, server: CpuGroup
) -> Sample:
    """Run ``argv`` to its end in ``group``: wall time, peak RSS of its largest process (and its children),
    peak open files of the process itself (sampled), CPU of the client and server sides."""

    def in_group_with_limit() -> None:
        group.add(os.getpid())
        resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))

    cpu_client, cpu_server = group.seconds(), server.seconds()
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=in_group_with_limit
    )
    streams: dict[str, bytes] = {}
    peak_files = 0
    done = threading.Event()

    def drain(name: str) -> None:
        streams[name] = getattr(proc, name).read()

    def sample() -> None:
        nonlocal peak_files
        while not done.wait(0.05):
            try:
                peak_files = max(peak_files, len(os.listdir(f"/proc/{proc.pid}/fd")))
            except OSError:
                return

    threads = [threading.Thread(target=drain, args=(n,)) for n in ("stdout", "stderr")]
    threads.append(threading.Thread(target=sample, daemon=True))
    for thread in threads:
        thread.start()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    cpu_client, cpu_server = group.seconds() - cpu_client, server.seconds() - cpu_server
    done.set()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for thread in threads[:2]:
        thread.join()
    try:
        ok = count_ok(streams["stdout"].decode(errors="replace"))  # type: ignore[operator]
    except (ValueError, IndexError, KeyError):
        ok = -1
    if ok != expect:
        raise RuntimeError(
            f"{argv[:4]}: {ok} of {expect} targets answered\n{streams['stderr'].decode()[-3000:]}"
        )
    return Sample(seconds, usage.ru_maxrss / 1024, peak_files, ok, cpu_client, cpu_server)


def pdsh_ok(out: str) -> int:
    return sum(1 for line in out.splitlines() if ": " in line)


def json_ok(out: str) -> int:
    return int(json.loads(out.strip().splitlines()[-1])["ok"])


@dataclass
class Bench:
    setup: SshSetup
    port: int
    work: Path
    repeat: int
    groups: dict[str, CpuGroup]
    results: dict[tuple[str, int], list[Sample]] = field(default_factory=dict)

    @property
    def user(self) -> str:
        return self.setup.users[SHELL]

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "TRAINPROBE_SSH_CONFIG": str(self.setup.ssh_config),
                "TRAINPROBE_RUNS_DIR": str(self.work / "runs"), **extra}  # fmt: skip

    def pdsh(self, hosts: list[str]) -> Sample:
        env = self.env(PDSH_SSH_ARGS=f"-F {self.setup.ssh_config} -p {self.port} -2 -a -x -l%u %h")
        argv = ["pdsh", "-R", "ssh", "-f", str(PARALLEL), "-l", self.user, "-w", ",".join(hosts),
                f"python3 -c '{WORK}'"]  # fmt: skip
        return measure(argv, env, len(hosts), pdsh_ok, self.groups["pdsh"], self.groups["sshd"])

    def worker(self, tool: str, spec: dict[str, object], expect: int, **env: str) -> Sample:
        path = self.work / f"{tool}-spec.json"
        path.write_text(json.dumps({**spec, "work": WORK, "parallel": PARALLEL}))
        argv = [sys.executable, str(ROOT / "benchmarks" / "_fanout_worker.py"), tool, str(path)]
        return measure(argv, self.env(**env), expect, json_ok, self.groups[tool], self.groups["sshd"])

    def trainprobe(self, hosts: list[str], control: str) -> Sample:
        targets = [f"ssh={self.user}@{host}:{self.port}" for host in hosts]
        return self.worker("trainprobe", {"targets": targets}, len(hosts), TRAINPROBE_CONTROL_DIR=control)

    def pssh(self, hosts: list[str]) -> Sample:
        spec = {"hosts": hosts, "user": self.user, "port": self.port, "key": str(self.setup.client_key)}
        return self.worker("pssh", spec, len(hosts))

    def record(self, name: str, size: int, sample: Sample) -> None:
        self.results.setdefault((name, size), []).append(sample)


def stop_masters(setup: SshSetup, control: Path) -> None:
    for sock in control.glob("*"):
        stop = ["ssh", "-F", str(setup.ssh_config), "-o", f"ControlPath={sock}", "-O", "exit", "x"]
        subprocess.run(stop, capture_output=True, timeout=30)


#: the tools one run measures, by their --tools name, in the order they run (pdsh always first: the baseline)
TOOLS = {"pdsh": "pdsh", "pssh": "parallel-ssh", "noreuse": "trainprobe cold, no reuse",
         "cold": "trainprobe cold", "warm": "trainprobe warm"}  # fmt: skip


def run_tool(bench: Bench, tool: str, hosts: list[str], control: Path) -> Sample:
    if tool == "pdsh":
        return bench.pdsh(hosts)
    if tool == "pssh":
        return bench.pssh(hosts)
    return bench.trainprobe(hosts, "" if tool == "noreuse" else str(control))


def run_size(bench: Bench, size: int, repeat: int, tools: list[str]) -> None:
    hosts = addresses(size)
    for _ in range(repeat):  # interleaved, so background load falls on every tool alike
        control = Path(tempfile.mkdtemp(prefix="tpf-", dir="/tmp"))
        try:
            for tool in TOOLS:
                if tool in tools:
                    bench.record(TOOLS[tool], size, run_tool(bench, tool, hosts, control))
        finally:
            stop_masters(bench.setup, control)
            shutil.rmtree(control, ignore_errors=True)


GOALS = {"trainprobe cold": 0.9, "trainprobe warm": 0.35}
MAX_RSS_MB = 64


class BusyLoops:
    """``count`` processes that spin on a CPU each, each in a session of its own (as another user's work is:
    the kernel's autogroup shares the CPUs between sessions), until the benchmark ends."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> BusyLoops:
        for _ in range(self.count):
            loop = ["sh", "-c", "while :; do :; done"]
            self.procs.append(subprocess.Popen(loop, stdin=subprocess.DEVNULL, start_new_session=True))
        return self

    def __exit__(self, *_: object) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(bench: Bench, sizes: list[int], busy: int, loads: tuple[str, str]) -> None:
    print(f"fan-out, {PARALLEL} at a time, under ulimit -n {OPEN_FILES}, {os.cpu_count()} CPUs, "
          f"{busy} busy loop(s) beside it, medians of the runs; ratios to pdsh in the same run")  # fmt: skip
    print(f"load average before: {loads[0]}, after: {loads[1]}")
    print("CPU per target: the tool and its ssh clients (and ControlMasters) + sshd and all below it")
    head = (
        f"{'tool':26} {'targets':>7} {'runs':>4} {'wall':>8} {'× pdsh':>7} {'CPU/target':>15} {'× pdsh':>7}"
    )
    print(f"{head} {'peak RSS':>9} {'files':>6}  goal (wall)")
    for size in sizes:
        base = statistics.median(s.seconds for s in bench.results[("pdsh", size)])
        pdsh = bench.results[("pdsh", size)]
        base_cpu = statistics.median(s.cpu_client + s.cpu_server for s in pdsh)
        for (name, n), samples in bench.results.items():
            if n != size:
                continue
            wall = statistics.median(s.seconds for s in samples)
            client = statistics.median(s.cpu_client for s in samples) / size * 1000
            server = statistics.median(s.cpu_server for s in samples) / size * 1000
            cpu = statistics.median(s.cpu_client + s.cpu_server for s in samples)
            rss = max(s.rss_mb for s in samples)
            files = max(s.open_files for s in samples)
            goal = ""
            if name in GOALS:
                met = wall / base <= GOALS[name] and rss <= MAX_RSS_MB
                goal = f"≤ {GOALS[name]:g}× pdsh, ≤ {MAX_RSS_MB} MB: {'met' if met else 'MISSED'}"
            row = f"{name:26} {size:>7} {len(samples):>4} {wall:>7.2f}s {wall / base:>6.2f}× "
            row += (
                f"{client:>5.0f}+{server:>4.0f} ms {cpu / base_cpu:>6.2f}× {rss:>7.0f}MB {files:>6}  {goal}"
            )
            print(row)


def firewall(port: int, add: bool) -> None:
    """While the benchmark runs, the sshd listening on every address answers on loopback only."""
    if shutil.which("iptables"):
        rule = ["INPUT", "-p", "tcp", "--dport", str(port), "!", "-i", "lo", "-j", "DROP"]
        subprocess.run(["iptables", "-I" if add else "-D", *rule], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,1000", help="numbers of targets, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the smallest size (larger: one run)")
    kex = "KexAlgorithms for every OpenSSH client (pdsh's and trainprobe's), e.g. curve25519-sha256 to see"
    parser.add_argument("--kex", help=kex + " the cost beyond the key exchange; default: OpenSSH's own")
    parser.add_argument("--busy", type=int, default=0, help="busy loops to run beside the tools (e.g. 2)")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"which to run, of {','.join(TOOLS)}")
    options = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (it starts sshd and adds a test user)")
    if not shutil.which("pdsh"):
        sys.exit("needs pdsh: apt-get install pdsh")
    # as an installed package has them (and remote.py does): without .pyc files (PYTHONDONTWRITEBYTECODE)
    # every trainprobe process would compile its modules from source first
    compileall.compile_dir(ROOT / "src" / "trainprobe", quiet=1)
    sizes = sorted(int(n) for n in options.sizes.split(","))
    tools = ["pdsh", *(t for t in options.tools.split(",") if t != "pdsh")]
    if unknown := [t for t in tools if t not in TOOLS]:
        sys.exit(f"unknown --tools {','.join(unknown)}; choose from {','.join(TOOLS)}")
    if "warm" in tools and "cold" not in tools:
        sys.exit("--tools warm needs cold (warm runs through the masters cold left)")
    setup = make_setup()
    if options.kex:
        with setup.ssh_config.open("a") as config:
            config.write(f"  KexAlgorithms {options.kex}\n")
    work = Path(tempfile.mkdtemp(prefix="tp-fanout-bench-"))
    port = free_port("0.0.0.0")
    firewall(port, add=True)
    groups = {name: CpuGroup(name) for name in ("sshd", "pdsh", "pssh", "trainprobe")}
    try:
        for group in groups.values():
            group.__enter__()
        server = setup.start("0.0.0.0", port)
        groups["sshd"].add(server.process.pid)
        bench = Bench(setup, port, work, options.repeat, groups)
        before = load_average()
        with BusyLoops(options.busy):
            for size in sizes:
                run_size(bench, size, options.repeat if size == sizes[0] else 1, tools)
        report(bench, sizes, options.busy, (before, load_average()))
    finally:
        for group in groups.values():
            group.__exit__()
        firewall(port, add=False)
        remove_setup(setup)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
