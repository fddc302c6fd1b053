"""Plain-text training logs, read by tokens rather than by line shapes.

:mod:`.chunks` reads the file, :mod:`.prefix` strips what loggers and launchers put before a message,
:mod:`.tokens` and :mod:`.fields` read what the message says, :mod:`.rows` what its fields make,
:mod:`.template` reads lines of a shape already seen in bulk (:mod:`.bulk` says which), :mod:`.parser` drives
it all, chunk by chunk, keeping for each of the first lines that gave no row the reason why
(``RunLog.unread``), which :func:`trainprobe.metrics.reading.no_rows_error` shows when a log gave no metric
rows.
"""

from __future__ import annotations

import re
from pathlib import Path

from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.readers.text.chunks import iter_line_chunks
from trainprobe.metrics.readers.text.parser import LineParser, read_text_file
from trainprobe.metrics.table import RunLog

_NUL_RUN = re.compile(rb"\x00{64,}")


class TextReader:
    """Any line-oriented text log; the fallback reader, so it accepts any file that is not binary."""

    name = "text"

    def sniff(self, path: Path, head: bytes) -> bool:
        # NULs only in long runs (a hole a crash or a preallocation left) still make a text log; scattered
        # NULs make a binary file
        return b"\x00" not in head or b"\x00" not in _NUL_RUN.sub(b"", head)

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        return [
            read_text_file(
                path,
                name=path.stem,
                event_patterns=list(options.event_patterns),
                line_pattern=options.line_pattern,
            )
        ]


__all__ = ["LineParser", "TextReader", "iter_line_chunks", "read_text_file"]
