"""Walking a directory of logs without losing sight of what could not be read.

An explicit stack (no recursion: a tree 10,000 levels deep is walked like a flat one), ``os.scandir`` per
directory, directory symlinks not followed (a link loop cannot walk for ever). Whatever the walk could not
open or ``stat`` — a directory with no read permission, a path longer than the system takes, a symlink loop,
a dangling link, something that is not a regular file (a FIFO, a socket, a device) where a log is named — is
written down as :class:`NotRead` (path and why), never dropped: a report of a directory with unread parts is
not "healthy" (``logs`` exits 2 and names them).

Only regular files are opened (:func:`regular_file`: a ``stat`` first), so a FIFO given as a path or met in
a tree never blocks a read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A tree with more entries than this is not walked further (reported as not read past that point).
MAX_ENTRIES = 2_000_000


@dataclass(frozen=True)
class NotRead:
    """A path the reading could not open, and why (``permission denied``, ``a symlink loop``, ...)."""

    path: str
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "why": self.why}

    @classmethod
    def from_json(cls, data: Any) -> NotRead:
        return cls(str(data["path"]), str(data["why"]))


def why_not(exc: OSError) -> str:
    """One phrase for an error that kept a path from being read."""
    if exc.errno == errno.ELOOP:
        return "a symbolic link loop"
    if exc.errno == errno.ENAMETOOLONG:
        return "the path is longer than the system takes"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return f"cannot open ({exc.strerror or exc})"


def regular_file(path: Path) -> str | None:
    """None when ``path`` is a regular file that can be opened for reading (following symlinks), else why
    it is not read: a FIFO or device would block or never end, a dangling link or loop has nothing behind
    it."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT and os.path.islink(path):
            return "a dangling symbolic link"
        return why_not(exc)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a FIFO, socket or device is not read)"
    if not os.access(path, os.R_OK):
        return "permission denied"
    return None


@dataclass
class Dir:
    """One directory of the walk: its path, sub-directory names (edit the list to prune) and file names."""

    path: Path
    dirs: list[str]
    files: list[str]


def walk(root: Path, not_read: list[NotRead]) -> Iterator[Dir]:
    """Each directory under ``root`` (``root`` first, then depth first in name order), sub-directories
    walked after the caller saw (and may have pruned) ``Dir.dirs``. Symlinks to directories are not walked
    into; symlinks to files are listed as files (:func:`regular_file` sorts them out). What could not be
    listed goes to ``not_read``."""
    stack: list[Path] = [root]
    seen = 0
    while stack:
        here = stack.pop()
        dirs: list[str] = []
        files: list[str] = []
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    seen += 1
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
        except OSError as exc:
            not_read.append(NotRead(str(here), why_not(exc)))
            continue
        dirs.sort()
        files.sort()
        node = Dir(here, dirs, files)
        yield node
        if seen > MAX_ENTRIES:
            if stack or node.dirs:
                not_read.append(
                    NotRead(str(here), f"the tree has over {MAX_ENTRIES:,} entries: not walked further")
                )
            return
        stack.extend(here / d for d in reversed(node.dirs))


def files_under(root: Path, not_read: list[NotRead]) -> list[Path]:
    """Every regular file under ``root`` (names starting with ``.`` left out), sorted; what is not one goes to
    ``not_read``."""
    out: list[Path] = []
    for node in walk(root, not_read):
        node.dirs[:] = [d for d in node.dirs if not d.startswith(".")]
        for name in node.files:
            if name.startswith("."):
                continue
            path = node.path / name
            why = regular_file(path)
            if why is None:
                out.append(path)
            else:
                not_read.append(NotRead(str(path), why))
    return sorted(out)


__all__ = ["MAX_ENTRIES", "Dir", "NotRead", "files_under", "regular_file", "walk", "why_not"]
