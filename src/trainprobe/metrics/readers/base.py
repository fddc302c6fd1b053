"""What a log reader is: a name, a content sniff, and ``read`` returning one ``RunLog`` per run in the
file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from trainprobe.metrics.table import RunLog


class LogReader(Protocol):
    name: str

    def sniff(self, path: Path, head: bytes) -> bool:
        """True when the first bytes of ``path`` look like this reader's format."""
        ...

    def read(self, path: Path, *, event_patterns: list[re.Pattern[str]] | None = None) -> list[RunLog]: ...
