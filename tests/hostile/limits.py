"""Run ``trainprobe`` under the limits a hostile input must stay within: an address-space cap, a CPU-time cap
and a wall-clock timeout; report its exit code, output, time and peak memory (from ``wait4``).

Shared by the hostile-case test and the fuzzer's worker (which runs many cases in one limited process)."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: The issue's target: every input ends in a verdict or one error line under a 2 GiB address-space limit.
ADDRESS_SPACE = 2 << 30
#: CPU seconds a single command may use (the wall-clock timeout is looser: the machine is shared).
CPU_SECONDS = 60
#: Wall-clock seconds after which a command is taken to hang and killed. A hang uses no CPU, so only the wall
#: clock tells it; a command's own cost is held to a budget in CPU seconds (``Outcome.cpu_seconds``), which a
#: busy machine does not stretch. Generous: a command that ends never waits for it.
HANG_GUARD_S = 180.0


def limit_resources(address_space: int = ADDRESS_SPACE, cpu_seconds: int = CPU_SECONDS) -> None:
    """In a child before it execs (``preexec_fn``), or in a worker process itself."""
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@dataclass
class Outcome:
    argv: list[str]
    code: int | None  # None: killed (timeout or a signal)
    stdout: str
    stderr: str
    seconds: float  # wall clock: how long it took on this machine, at its load
    max_rss_mb: float
    signal: int | None = None
    timed_out: bool = False
    cpu_seconds: float = 0.0  # user + system time of the command: its own cost, whatever the load

    def within(self, seconds: float) -> bool:
        """The command ended by itself and cost at most ``seconds`` of CPU time."""
        return not self.timed_out and self.cpu_seconds <= seconds

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.stderr or "Traceback" in self.stdout

    def describe(self) -> str:
        how = (
            "timed out"
            if self.timed_out
            else f"killed by signal {self.signal}"
            if self.signal
            else f"exit {self.code}"
        )
        return (
            f"trainprobe {' '.join(self.argv)}: {how} after {self.seconds:.1f}s "
            f"({self.cpu_seconds:.1f}s CPU), {self.max_rss_mb:.0f} MB\n"
            f"stdout: {self.stdout[-1500:]}\nstderr: {self.stderr[-3000:]}"
        )


#: Forks and execs the command under the limits, then reports the child's peak RSS on a pipe. A child forked
#: straight from the test process would not do: Linux carries a process's RSS at exec into its ``ru_maxrss``,
#: so every command would be charged the test process's own memory (hundreds of MB late in a full run).
_LAUNCHER = """
import os, resource, sys
fd, space, cpu, cmd = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_AS, (space, space))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.execv(cmd[0], cmd)
_, status, usage = os.wait4(pid, 0)
os.write(fd, f"{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}".encode())
code = os.waitstatus_to_exitcode(status)
if code < 0:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.kill(os.getpid(), -code)
os._exit(code)
"""


def run_trainprobe(
    argv: list[str],
    *,
    timeout: float = HANG_GUARD_S,
    cwd: Path | None = None,
    address_space: int = ADDRESS_SPACE,
    env: dict[str, str] | None = None,
) -> Outcome:
    """``python -m trainprobe ARGV`` in a grandchild limited as :func:`limit_resources` does."""
    rss_r, rss_w = os.pipe()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        launcher = [sys.executable, "-S", "-c", _LAUNCHER, str(rss_w), str(address_space), str(CPU_SECONDS)]
        proc = subprocess.Popen(
            [*launcher, sys.executable, "-m", "trainprobe", *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd,
            env={**os.environ, "COLUMNS": "200", **(env or {})},
            pass_fds=(rss_w,),
            start_new_session=True,  # a timeout kills the launcher and the command alike
        )
        os.close(rss_w)
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            proc.wait()
        finally:
            timer.cancel()
        with os.fdopen(rss_r, "rb") as fh:
            reported = fh.read()
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    code = proc.returncode
    sig = -code if code < 0 else None
    rss_kb, cpu = [*reported.split(), b"0", b"0"][:2]  # nothing reported: the launcher itself was killed
    return Outcome(
        argv,
        None if sig else code,
        stdout,
        stderr,
        seconds,
        int(rss_kb) / 1024,
        signal=sig,
        timed_out=timed_out.is_set(),
        cpu_seconds=float(cpu),
    )


#: RSS that varies between two runs of one command on one input (allocator, import order, page cache).
RSS_SLACK_MB = 24.0
_BASELINES: dict[str, float] = {}


def baseline_rss_mb(command: str, argv_of: Callable[[Path], list[str]]) -> float:
    """The peak RSS of ``command`` on a tiny healthy checkpoint (``argv_of(path)`` builds its argv), measured
    once per test session on this machine: what the program costs before any data is kept."""
    if command not in _BASELINES:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "model.safetensors"
            header = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'
            path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 8)
            runs = [run_trainprobe(argv_of(path)) for _ in range(2)]
        _BASELINES[command] = max(r.max_rss_mb for r in runs)
    return _BASELINES[command]


def data_mb(path: Path) -> float:
    """The bytes a command could keep of ``path``: its size, or the sizes of the files under it (a file's
    stated size, not its blocks: a sparse file counts whole). What cannot be reached (a path past PATH_MAX,
    an unreadable folder) counts nothing."""
    total, stack = 0, [str(path)]
    while stack:
        top = stack.pop()
        try:
            info = os.lstat(top)
            if os.path.isdir(top) and not os.path.islink(top):
                stack.extend(os.path.join(top, n) for n in os.listdir(top))
            elif os.path.isfile(top) and not os.path.islink(top):
                total += info.st_size
        except OSError:
            continue
    return total / 2**20


def memory_budget_mb(baseline: float, kept: float) -> float:
    """Issue 19's rule: peak RSS within the program's own baseline plus twice the data it keeps."""
    return baseline + 2 * kept + RSS_SLACK_MB
