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
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:  # imported where a pool is made: a small scan never needs it (concurrent.futures: ms)
    from concurrent.futures import Executor

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Pending(Protocol[T_co]):
    """A submitted job's answer to come (a :class:`Pool`'s or a ``concurrent.futures.Future``)."""

    def result(self) -> T_co: ...

    def cancel(self) -> bool: ...


class Submitter(Protocol):
    """What :func:`in_order` needs of a pool: ``submit(job)``."""

    def submit(self, fn: Callable[[], T], /) -> Pending[T]: ...


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
    jobs: Iterable[Callable[[], T]], pool: Submitter | None, workers: int, *, window: int | None = None
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
    pending: collections.deque[Pending[T]] = collections.deque()
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


class _Job(Generic[T]):
    """One job of a :class:`Pool`: run by a worker, its value (or what it raised) awaited by ``result``."""

    __slots__ = ("_cancelled", "_error", "_fn", "_latch", "_value")

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._latch = threading.Lock()
        self._latch.acquire()  # held until the job has run: result() waits on it
        self._value: T | None = None
        self._error: BaseException | None = None
        self._cancelled = False

    def run(self) -> None:
        try:
            if not self._cancelled:
                self._value = self._fn()
        except BaseException as exc:  # handed to whoever waits for it, as concurrent.futures does
            self._error = exc
        finally:
            self._latch.release()

    def result(self) -> T:
        with self._latch:
            pass
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set by run(): a T unless it raised

    def cancel(self) -> bool:
        self._cancelled = True  # a job a worker has already taken runs to its end
        return True


class Pool:
    """``workers`` threads taking jobs in the order they are submitted: what :func:`in_order` needs of a
    pool, without importing ``concurrent.futures`` (which imports ``logging``: 3-4 ms of a scan's time,
    as much as a 100 MB file's NaN pass on two cores)."""

    def __init__(self, workers: int, name: str) -> None:
        from queue import SimpleQueue  # C; queue's import is a fraction of a millisecond

        self._queue: SimpleQueue[_Job[Any] | None] = SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True) for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            job.run()

    def submit(self, fn: Callable[[], T], /) -> _Job[T]:
        job = _Job(fn)
        self._queue.put(job)
        return job

    def shutdown(self) -> None:
        """Let every worker finish the jobs already submitted, then end; returns when they have."""
        for _thread in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()


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
