"""A read lease on a mapped checkpoint file, so that a tensor's pass may read the map itself without SIGBUS.

Touching a page of a map past the end of a file that shrank raises SIGBUS, so the NaN/Inf pass of a large
tensor copies each block with ``pread`` (:mod:`trainprobe.checkpoint.stable_read`): on two cores the copy
costs more than the check. A Linux read lease (``fcntl(F_SETLEASE, F_RDLCK)``) makes every other open of the
file for writing, and every truncate, wait until the holder lets go (at most ``/proc/sys/fs/lease-break-time``
seconds); the holder sees the break pending in ``F_GETLEASE``. So a reader that finds the lease whole before
each block, and lets go only when no thread is inside a block, reads mapped bytes that cannot be cut under
it: the writer waits at most a block (the rest is then read with ``pread``), never the whole scan. A scanner
that is stopped (SIGSTOP, Ctrl-Z) while it holds a lease holds a writer's ``open`` up to lease-break-time
(then the kernel takes the lease back, and a page the writer cuts before the scanner resumes is a SIGBUS in
it): the price of reading the map, paid only by a scan someone stopped in the middle of a save.

Where no lease can be had — not Linux, another user's file, a file open for writing, a filesystem without
leases, a short lease-break-time — :func:`take_lease` gives None and the tensor is read with ``pread`` as
before. The break is told by a signal whose default is to be ignored (SIGURG), not SIGIO (which would end
the process), and seen by polling ``F_GETLEASE``, so no handler is installed (any thread may hold a lease); a
process that handles SIGURG itself takes no lease, so its handler is never called for one. Stdlib only.
"""

from __future__ import annotations

import functools
import mmap
import os
import signal
import sys
import threading
from typing import Any

from trainprobe.checkpoint.reading.mapping import MAPPED

#: A lease-break-time shorter than this (seconds) is not trusted: a thread descheduled that long inside a
#: block would read a page the writer has cut.
MIN_BREAK_SECONDS = 5


#: SIGURG dispositions of a process that does not handle it (None: set from outside Python).
_UNHANDLED = (signal.SIG_DFL, signal.SIG_IGN, None)


@functools.cache
def leases_usable() -> bool:
    """Whether this system grants read leases with a break time long enough to rely on."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import fcntl

        if not (hasattr(fcntl, "F_SETLEASE") and hasattr(fcntl, "F_SETSIG")):
            return False
        with open("/proc/sys/fs/leases-enable") as fh:
            if fh.read().strip() != "1":
                return False
        with open("/proc/sys/fs/lease-break-time") as fh:
            return int(fh.read().strip()) >= MIN_BREAK_SECONDS
    except (OSError, ValueError, ImportError):
        return False


class Lease:
    """A read lease held on one file: ``enter()`` before a block of its map is read (False: the lease is
    broken or let go, the block must not be read), ``leave()`` after; ``size``: the file's bytes when the
    lease was taken (they cannot shrink while it holds). ``let_go()`` ends it (idempotent)."""

    def __init__(self, fd: int, size: int) -> None:
        self.size = size
        self._fd = fd
        self._lock = threading.Lock()
        self._inside = 0
        self._ending = False
        self.broken = False

    def enter(self) -> bool:
        import fcntl

        with self._lock:
            if self._fd < 0 or self.broken or self._ending:
                return False
            try:
                whole = fcntl.fcntl(self._fd, fcntl.F_GETLEASE) == fcntl.F_RDLCK
            except OSError:
                whole = False
            if not whole:  # a writer waits for it: no block from now on, and let go once none is read
                self.broken = True
                self._let_go_if_idle()
                return False
            self._inside += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._inside -= 1
            if self.broken or self._ending:
                self._let_go_if_idle()

    def let_go(self) -> None:
        """End the lease: now if no block is being read, else when the last one is left."""
        with self._lock:
            self._ending = True
            self._let_go_if_idle()

    def _let_go_if_idle(self) -> None:
        if self._inside == 0 and self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)  # closing the descriptor ends its lease


def take_lease(buffer: Any) -> Lease | None:
    """A read lease on the file a :func:`~trainprobe.checkpoint.reading.mapping.map_file` map shows, when it
    is the same inode and the system grants one; else None (read with ``pread``)."""
    seen = MAPPED.get(buffer) if isinstance(buffer, mmap.mmap) else None
    if seen is None or not leases_usable() or signal.getsignal(signal.SIGURG) not in _UNHANDLED:
        return None
    import fcntl

    path, dev, ino = seen
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (dev, ino):
            raise OSError("replaced")
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)  # before the lease: SIGIO would end the process
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
        size = os.fstat(fd).st_size  # from here on it cannot shrink but through a break
    except OSError:
        os.close(fd)
        return None
    return Lease(fd, size)
