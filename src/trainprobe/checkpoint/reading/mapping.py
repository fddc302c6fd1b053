"""Checkpoint files as read-only memory maps, and what a reader needs to read them safely: which file a map
shows (for ``pread``) and how to drop pages already read from the resident set."""

from __future__ import annotations

import contextlib
import mmap
import os
import weakref
from collections.abc import Callable
from typing import Any


def map_file(path: str) -> mmap.mmap | bytes:
    """A read-only memory map of ``path`` (an empty bytes object for an empty file, which cannot be
    mapped)."""
    from trainprobe.checkpoint.safe_io import require_regular

    require_regular(path)  # a FIFO or a device is never opened
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return b""
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        st = os.fstat(fh.fileno())
        MAPPED[mapped] = (path, st.st_dev, st.st_ino)
        return mapped


#: The file each map of :func:`map_file` shows (path, device, inode): tensor data is read from it with
#: ``pread`` (:mod:`trainprobe.checkpoint.stable_read`), so a file truncated while read is never a SIGBUS.
MAPPED: weakref.WeakKeyDictionary[mmap.mmap, tuple[str, int, int]] = weakref.WeakKeyDictionary()


_PAGE = mmap.PAGESIZE


def page_releaser(buffer: Any) -> Callable[[int, int], None]:
    """For a file mapping: a function that drops the whole pages inside byte range ``[lo, hi)`` from this
    process's resident set. They stay in the page cache (a later read costs a minor fault, not I/O), so RSS
    stays at a few chunks whatever the checkpoint's size. A page only partly inside the range, which may hold
    a neighbouring tensor or record that another thread is reading, is kept; other buffers are left alone."""
    if not isinstance(buffer, mmap.mmap) or not hasattr(buffer, "madvise"):
        return lambda _lo, _hi: None

    def release(lo: int, hi: int) -> None:
        lo = -(-lo // _PAGE) * _PAGE
        hi = hi // _PAGE * _PAGE
        if hi > lo:
            with contextlib.suppress(OSError, ValueError):
                buffer.madvise(mmap.MADV_DONTNEED, lo, hi - lo)

    return release
