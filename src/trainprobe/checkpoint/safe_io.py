"""Reading the filesystem around checkpoints without trusting it: only regular files opened, side files read
with a cap, and a walk that says what it could not open.

- :func:`read_side`: the bytes of a small side file (an HF index, ``trainer_state.json``, ``latest``, a DCP
  ``.metadata``, a manifest), refused (an OSError) when it is not a regular file (a FIFO, ``/dev/zero``) or
  larger than the cap. Opened non-blocking, so a FIFO never blocks.
- :func:`require_regular`: ``stat`` first; an OSError unless ``path`` is a regular file (or a directory,
  when allowed).
- :func:`walk`: ``os.walk``'s top-down order with an explicit stack (no recursion, any depth), never
  following directory symlinks; whatever it cannot open (an unreadable directory, a too-long path, a
  symlink loop, a dangling link) is appended to ``not_read`` as ``(path, reason)``.

Stdlib only.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator

#: How the reason of a tensor whose file was cut while it was read starts: unreadable, not corrupt.
CHANGED_WHILE_READ = "changed while read"

#: The most bytes a side file may hold.
SIDE_CAP = 64 << 20


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def require_regular(path: str, *, allow_dir: bool = False) -> os.stat_result:
    """``os.stat(path)``, or an OSError when ``path`` is not a regular file (nor a directory if allowed)."""
    st = os.stat(path)
    if stat.S_ISREG(st.st_mode) or (allow_dir and stat.S_ISDIR(st.st_mode)):
        return st
    raise OSError(errno.EINVAL, "not a regular file", path)


def read_side(path: str, cap: int = SIDE_CAP) -> bytes:
    """The bytes of the small side file ``path``: an OSError when it is not a regular file or holds more
    than ``cap`` bytes."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        if st.st_size > cap:
            raise OSError(errno.EFBIG, f"larger than {cap >> 20} MiB", path)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:
                raise OSError(errno.EFBIG, f"larger than {cap >> 20} MiB", path)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_side_text(path: str, cap: int = SIDE_CAP) -> str:
    """:func:`read_side` decoded as UTF-8 (a UnicodeDecodeError, a ValueError, when it is not)."""
    return read_side(path, cap).decode("utf-8")


def walk(root: str, not_read: list[tuple[str, str]]) -> Iterator[tuple[str, list[str], list[str]]]:
    """``(folder, dirs, files)`` top-down like ``os.walk`` (sorted; prune ``dirs`` in place), from an
    explicit stack. Directory symlinks are listed in ``dirs`` but never entered; links that resolve to
    nothing (dangling, a loop) and folders that cannot be listed go to ``not_read``."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as exc:
            not_read.append((folder, _reason(exc)))
            continue
        dirs: list[str] = []
        files: list[str] = []
        real: set[str] = set()
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    dirs.append(entry.name)
                    real.add(entry.name)
                elif entry.is_symlink():
                    target = os.stat(entry.path)  # a loop or a dangling link raises here
                    (dirs if stat.S_ISDIR(target.st_mode) else files).append(entry.name)
                else:
                    files.append(entry.name)
            except OSError as exc:
                not_read.append((entry.path, _reason(exc)))
        dirs.sort()
        files.sort()
        yield folder, dirs, files
        stack.extend(os.path.join(folder, d) for d in reversed(dirs) if d in real)


def walk_files(root: str, not_read: list[tuple[str, str]]) -> Iterator[str]:
    """Every regular file under ``root`` (sorted, top-down), by :func:`walk`; what is not read is noted."""
    for folder, _dirs, files in walk(root, not_read):
        for name in files:
            full = os.path.join(folder, name)
            try:
                require_regular(full)
            except OSError as exc:
                not_read.append((full, _reason(exc)))
                continue
            yield full
