"""A text log as byte chunks of whole lines: bounded memory (an overlong line is dropped while it is read)
and holes of sparse files skipped, not read; a chunk or a line cleaned of terminal escapes and of the
rewrites of a progress bar before it is parsed."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

MAX_LINE = 1 << 16  # longer lines are skipped: no metric line is this long, and a hostile one costs time
_CHUNK = 8 << 20
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
_ANSI_TEXT = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_REWRITTEN = re.compile(rb"[^\n\r]*\r")


@dataclass
class LineChunks:
    """The file as byte chunks of complete lines (no trailing newline), no line split between two; a line
    longer than ``MAX_LINE`` is dropped while it is read (counted in ``overlong``): memory stays bounded."""

    path: Path
    size: int = _CHUNK
    overlong: int = 0
    _skipping: bool = field(default=False, repr=False)

    def __iter__(self) -> Iterator[bytes]:
        # read into one buffer, reused: a fresh 8 MB object per read would be page-faulted in every time;
        # what is yielded is a copy (the lines of the buffer joined to the line left over from the last)
        with open(self.path, "rb") as fh:
            try:  # a small file gets a small buffer (zeroing 8 MB per file is most of a small log's cost)
                size = max(4096, min(self.size, os.fstat(fh.fileno()).st_size + 1))
            except OSError:
                size = self.size
            buf = bytearray(size)
            view = memoryview(buf)
            rest = b""
            while True:
                if _skip_hole(fh):
                    rest, self._skipping = b"", True  # the hole is NULs: the line it is in is no metric line
                end = fh.readinto(buf)
                if not end:
                    break
                start = 0
                if self._skipping:
                    cut = buf.find(b"\n", 0, end)
                    if cut < 0:
                        continue
                    start = cut + 1
                    self._skipping = False
                cut = buf.rfind(b"\n", start, end)
                if cut < 0:
                    rest += view[start:end]
                    if len(rest) > MAX_LINE:
                        rest, self._skipping = b"", True
                        self.overlong += 1
                    continue
                lines = b"".join((rest, view[start:cut]))
                rest = bytes(view[cut + 1 : end])
                if len(rest) > MAX_LINE:
                    rest, self._skipping = b"", True
                    self.overlong += 1
                if lines:
                    yield lines
            if rest.strip():
                yield rest


_SEEK_DATA: int | None = getattr(os, "SEEK_DATA", None)


def _skip_hole(fh: BinaryIO) -> bool:
    """Seek past a hole of a sparse file (NULs the file system does not store, a terabyte read in no time);
    True when one was skipped."""
    if _SEEK_DATA is None:
        return False
    at = fh.tell()
    try:
        data = os.lseek(fh.fileno(), at, _SEEK_DATA)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # a file system without SEEK_DATA: read it all
            return False
        end = os.fstat(fh.fileno()).st_size  # ENXIO: only a hole from here to the end
        if end > at:
            fh.seek(end)
            return True
        return False
    if data > at:
        fh.seek(data)
        return True
    return False


def clean_chunk(chunk: bytes) -> bytes:
    """Complete lines without colour codes; of a line a progress bar rewrote with ``\\r``, its last
    rewrite."""
    if b"\x1b" in chunk:
        chunk = _ANSI.sub(b"", chunk)
    if chunk.endswith(b"\r"):
        chunk = chunk[:-1]  # the CR of a CRLF whose LF ended the chunk
    if b"\r" in chunk:
        # a line a progress bar rewrote in place: its last rewrite is what it finally said
        chunk = _REWRITTEN.sub(b"", chunk.replace(b"\r\n", b"\n"))
    return chunk


def clean_line(line: str) -> str:
    """One line as :func:`clean_chunk` cleans a chunk's (its line end dropped)."""
    line = line.rstrip("\r\n")
    if "\x1b" in line:
        line = _ANSI_TEXT.sub("", line)
    return line.rsplit("\r", 1)[-1]


def iter_line_chunks(path: Path, size: int = _CHUNK) -> Iterator[bytes]:
    return iter(LineChunks(path, size))


__all__ = ["MAX_LINE", "LineChunks", "clean_chunk", "clean_line", "iter_line_chunks"]
