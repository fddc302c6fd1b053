"""Following a growing log like ``tail -F`` and running the detectors as it grows (``trainprobe watch``), and
the findings of its last lines alone (:func:`tail_findings`: the MCP tool ``watch_tail``, shipped to where
the log is by :func:`trainprobe.tasks.tail.tail_on`)."""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from trainprobe.errors import LogError
from trainprobe.metrics.analyze import LogReport, Options, analyze
from trainprobe.metrics.findings import CLIFF, SPIKE, Finding
from trainprobe.metrics.readers.json_values import flatten
from trainprobe.metrics.readers.text import LineParser
from trainprobe.metrics.table import RunLog
from trainprobe.metrics.user_regex import compile_user_regex
from trainprobe.metrics.walk import why_not

_CHUNK = 64 << 20  # the most one poll reads (the rest comes on the next polls)
_MAX_LINE = 1 << 20  # a partial line longer than this is dropped, not buffered
_SEEK_DATA: int | None = getattr(os, "SEEK_DATA", None)
_TAIL_BLOCK = 1 << 20  # read_tail reads backwards this much at a time


class FileFollower:
    """New complete lines of a file, across rotation (the path now names a new file) and truncation.

    A partial last line stays buffered until its newline arrives, so a line is never split or repeated.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: BinaryIO | None = None
        self._ino: tuple[int, int] | None = None
        self._buf = b""
        self.offset = 0
        self.rotations = 0
        self.behind = False  # the last poll read a full chunk: more is there already

    def _open(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise LogError(str(self.path), why_not(exc)) from None
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the open and every poll
            raise LogError(str(self.path), "not a regular file (a FIFO, socket or device is not followed)")
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - kept open across polls on purpose
        except FileNotFoundError:
            return False
        st = os.fstat(fh.fileno())
        self._fh, self._ino, self.offset, self._buf = fh, (st.st_dev, st.st_ino), 0, b""
        return True

    def _read_rest(self) -> bytes:
        fh = self._fh
        assert fh is not None
        self._skip_hole(fh)
        data = fh.read(_CHUNK)
        self.offset += len(data)
        self.behind = len(data) == _CHUNK
        return data

    def _skip_hole(self, fh: BinaryIO) -> None:
        """Seek past a hole (a sparse run of NULs: no line is in it) rather than read it."""
        if _SEEK_DATA is None:
            return
        try:
            at = os.lseek(fh.fileno(), self.offset, _SEEK_DATA)
        except OSError:  # ENXIO: nothing but a hole to the end (or no SEEK_DATA support here)
            return
        if at > self.offset:
            fh.seek(at)
            self.offset = at
            self._buf = b""

    def poll(self) -> list[str]:
        if self._fh is None and not self._open():
            return []
        fh = self._fh
        assert fh is not None
        data = self._read_rest()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
        if st is not None and (st.st_dev, st.st_ino) != self._ino:
            # Rotated: finish the old file, then start the new one from its beginning.
            fh.close()
            tail = self._buf + data
            self.rotations += 1
            self._open()
            data = (
                tail + self._read_rest()
                if not tail or tail.endswith(b"\n")
                else tail + b"\n" + self._read_rest()
            )
            self._buf = b""
        elif st is not None and st.st_size < self.offset:
            fh.seek(0)
            self.offset = 0
            self._buf = b""
            data = self._read_rest()
        data = self._buf + data
        cut = data.rfind(b"\n")
        if cut < 0:
            # a "line" past the cap is no metric line (a run of NULs, a binary blob): dropped, not kept
            self._buf = data if len(data) <= _MAX_LINE else b""
            return []
        self._buf = data[cut + 1 :]
        return data[:cut].decode("utf-8", errors="replace").split("\n")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


@dataclass
class OnlineAnalyzer:
    """Feeds lines to a text or JSONL parser and re-runs the detectors; hands out only new findings.

    A finding is held back until a few rows exist after it, so a one-step spike is reported with its recovery.
    """

    name: str
    options: Options = field(default_factory=Options)
    settle_rows: int = 5

    def __post_init__(self) -> None:
        patterns = [compile_user_regex("--event", p) for p in self.options.event_patterns]
        self.parser = LineParser(self.name, self.name, event_patterns=patterns)
        self.json_rows = 0
        self.seen: set[tuple[str, str, str, float]] = set()
        self.report: LogReport | None = None

    def feed(self, lines: list[str]) -> None:
        for line in lines:
            stripped = line.strip()
            if stripped.startswith("{") and stripped.endswith("}"):
                try:
                    obj = json.loads(stripped)
                except ValueError:
                    obj = None
                if isinstance(obj, dict):
                    self.parser.feed_row(flatten(obj))
                    continue
            self.parser.feed_line(line)

    def run(self) -> RunLog:
        return self.parser.run(final=False)

    def new_findings(self, *, final: bool = False) -> list[Finding]:
        run = self.run()
        if len(run) < 2:
            return []
        self.report = analyze(run, options=self.options)
        fresh: list[Finding] = []
        for f in self.report.findings:
            key = (f.kind, f.run, f.metric, f.step)
            if key in self.seen:
                continue
            if not final and f.row > len(run) - self.settle_rows:
                continue
            # A jump that has not come back yet may be a spike or a cliff: wait for a window of rows to tell.
            if (
                not final
                and f.kind in (SPIKE, CLIFF)
                and f.recovered_after is None
                and f.row > len(run) - self.options.window
            ):
                continue
            self.seen.add(key)
            fresh.append(f)
        return fresh


def watch_file(
    path: Path,
    on_finding: Callable[[Finding], None],
    *,
    options: Options | None = None,
    interval: float = 1.0,
    should_stop: Callable[[], bool] = lambda: False,
) -> LogReport | None:
    """Follow ``path`` until ``should_stop()`` or Ctrl-C; call ``on_finding`` for each new finding; return the
    final report (None if no metric rows ever arrived)."""
    follower = FileFollower(path)
    online = OnlineAnalyzer(path.stem, options or Options())
    try:
        while not should_stop():
            lines = follower.poll()
            if lines:
                online.feed(lines)
                for f in online.new_findings():
                    on_finding(f)
            if not follower.behind:
                time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        follower.close()
    for f in online.new_findings(final=True) if len(online.run()) >= 2 else []:
        on_finding(f)
    return online.report


def read_tail(path: str, lines: int) -> tuple[list[str], int, int]:
    """(the last ``lines`` complete lines of ``path``, the byte offset of the first, the file's size).

    Read backwards a block at a time, so a 450 MB log costs what its tail costs. A last line without its
    newline is still being written and is left for the next look."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; only a regular file is read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise LogError(path, "not a regular file (a FIFO, socket or device is not read)")
        with open(fd, "rb") as fh:
            size = fh.seek(0, 2)
            start, blocks, newlines = size, [], 0
            while start > 0 and newlines <= lines:
                step = min(_TAIL_BLOCK, start)
                start -= step
                fh.seek(start)
                block = fh.read(step)
                newlines += block.count(b"\n")
                blocks.append(block)
    except FileNotFoundError:
        raise LogError(path, "no such file or directory", hint="check the path") from None
    except IsADirectoryError:
        raise LogError(path, "is a directory", hint="watch one log file") from None
    except OSError as exc:
        raise LogError(path, f"cannot be read ({exc.strerror or exc})") from None
    data = b"".join(reversed(blocks))
    end = data.rfind(b"\n") + 1
    parts = data[:end].split(b"\n")[:-1]
    if start > 0:
        parts = parts[1:]  # the first one began before the bytes read
    kept = parts[-lines:] if lines else []
    first = start + end - sum(len(p) + 1 for p in kept)
    return [p.decode("utf-8", "replace") for p in kept], first, size


def tail_findings(
    path: str,
    *,
    lines: int = 5000,
    since_step: float | None = None,
    threshold: float = 6.0,
    event_patterns: Sequence[str] = (),
) -> dict[str, Any]:
    """The findings of the last ``lines`` lines of a growing text or JSONL log, as ``watch`` finds them (its
    summary document), with a ``tail`` object saying which bytes were read; only findings after
    ``since_step`` when given."""
    text, first, size = read_tail(path, lines)
    online = OnlineAnalyzer(
        Path(path).stem, Options(threshold=threshold, event_patterns=list(event_patterns))
    )
    online.feed(text)
    rows = len(online.run())
    if rows < 2:
        raise LogError(
            path,
            f"no metric rows in its last {len(text)} line(s)",
            hint="a tail is read as a text or JSONL log; logs reads CSV, TensorBoard and the rest",
        )
    online.new_findings(final=True)
    assert online.report is not None  # set by new_findings once there are two rows
    document = online.report.to_json()
    total = len(document["findings"])
    if since_step is not None:
        document["findings"] = [f for f in document["findings"] if _after(f["step"], since_step)]
        document["summary"] = {
            s: sum(f["severity"] == s for f in document["findings"]) for s in document["summary"]
        }
    document["tail"] = {
        "path": path,
        "file_bytes": size,
        "from_byte": first,
        "lines": len(text),
        "rows": rows,
        "since_step": since_step,
        "findings_before_since_step": total - len(document["findings"]),
    }
    return document


def _after(step: Any, since: float) -> bool:
    return isinstance(step, (int, float)) and step > since
