"""Threads for reading tensors: how many by default, and jobs run with a bounded window in flight, their
results handed back in the order the jobs came, so that no report depends on which thread finished first.

numpy's loops, ``os.preadv`` and the CRC32 functions release the GIL on large buffers, so threads check the
pieces of tensors in parallel; what holds the GIL between them is a few microseconds of Python per block.
One worker is the sequential path itself: every job runs in the calling thread, as it is asked for, and no
pool is made. Stdlib only.
"""

from __future__ import annotations

import collections
import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:  # imported where a pool is made: a small scan never needs it (concurrent.futures: ms)
    from concurrent.futures import Executor, Future

T = TypeVar("T")

#: The most threads by default, whatever the cores: beyond this the threads contend for the GIL between
#: numpy's calls and for memory bandwidth more than they add (``--workers`` goes past it).
MAX_DEFAULT_WORKERS = 32

#: Jobs submitted ahead of the one whose result is awaited, per worker: enough that no worker idles while
#: the results of a slow job are awaited, few enough that what is in flight stays a few pieces per thread.
WINDOW_PER_WORKER = 2


def _cgroup_cpus() -> float | None:
    """The CPUs a cgroup v2 quota (``cpu.max``) allows this process, or None when there is none."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            quota, period = fh.read().split()[:2]
        if quota == "max":
            return None
        return int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None


def default_workers() -> int:
    """Threads for reading tensors when the caller names none: the cores this process may run on (its CPU
    affinity, and a container's CPU quota when it sets one), at most :data:`MAX_DEFAULT_WORKERS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_cpus()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, min(MAX_DEFAULT_WORKERS, cores))


def in_order(
    jobs: Iterable[Callable[[], T]], pool: Executor | None, workers: int, *, window: int | None = None
) -> Iterator[T]:
    """Each job's result, in the jobs' order. With a ``pool``: at most ``window`` jobs (default
    :data:`WINDOW_PER_WORKER` per worker) submitted and not yet handed back, so jobs are taken from
    ``jobs`` only as fast as results are consumed. Without one: each job in this thread. A job that raises
    raises here, at its place."""
    if pool is None:
        for job in jobs:
            yield job()
        return
    ahead = max(1, window or WINDOW_PER_WORKER * workers)
    pending: collections.deque[Future[T]] = collections.deque()
    try:
        for job in jobs:
            pending.append(pool.submit(job))
            if len(pending) >= ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:  # the consumer stopped early: what has not started does not start
            future.cancel()


_SHARED: Executor | None = None
_SHARED_LOCK = threading.Lock()


def shared_pool() -> Executor:
    """One pool of :func:`default_workers` threads for the pieces of a large tensor whose check was asked
    for on its own (``count_nonfinite``, from any thread: check's pool asks for its tensors one by one).
    Its jobs never wait on other jobs, so a thread of another pool may wait on them."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            from concurrent.futures import ThreadPoolExecutor

            _SHARED = ThreadPoolExecutor(max_workers=default_workers(), thread_name_prefix="trainprobe-read")
        return _SHARED


P = TypeVar("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Plan(Generic[P, R]):
    """A piece of work as jobs (each one piece of it, for any thread) and how their results, in the jobs'
    order, make its answer: ``finish(results)``."""

    jobs: Sequence[Callable[[], P]]
    finish: Callable[[list[P]], R]

    def run(self, workers: int | None = None) -> R:
        """The answer, the jobs run on :func:`shared_pool` when there are several (``workers`` 1: in this
        thread, one after the other)."""
        if len(self.jobs) > 1 and workers != 1:
            results = list(in_order(self.jobs, shared_pool(), workers or default_workers()))
        else:
            results = [job() for job in self.jobs]
        return self.finish(results)
