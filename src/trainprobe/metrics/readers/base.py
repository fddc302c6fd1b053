"""What a log reader is: a name, a content sniff, and ``read`` returning one ``RunLog`` per run in the
file; and what a reader of a run *directory* is (W&B, MLflow): ``claims`` a directory, ``read_dir`` it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from trainprobe.metrics.table import RunLog
from trainprobe.metrics.walk import NotRead


@dataclass(frozen=True)
class ReadOptions:
    """What the user told every reader: lines that are events (``--event``), and a line pattern
    (``--pattern``: named groups ``step`` and any metric) that replaces the text reader's tokenizer."""

    event_patterns: tuple[re.Pattern[str], ...] = ()
    line_pattern: re.Pattern[str] | None = None


class LogReader(Protocol):
    name: str

    def sniff(self, path: Path, head: bytes) -> bool:
        """True when the first bytes of ``path`` look like this reader's format."""
        ...

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]: ...


class RunDirReader(Protocol):
    name: str

    def claims(self, directory: Path) -> bool:
        """True when ``directory`` is a run directory of this kind (read as a whole, not file by file)."""
        ...

    def owns(self, directory: Path) -> tuple[frozenset[Path], frozenset[str]]:
        """What reading ``directory`` takes: the files it reads (or knows as its own bookkeeping) and the
        sub-directories it reads whole. Everything else in the tree is still walked for logs."""
        ...

    def read_dir(self, directory: Path, options: ReadOptions, not_read: list[NotRead]) -> list[RunLog]:
        """The runs of ``directory``; what could not be read goes to ``not_read``."""
        ...


__all__ = ["LogReader", "ReadOptions", "RunDirReader"]
