"""Log readers, one module each, tried in this order on a file's first bytes (the text reader accepts
anything that is not binary); run-directory readers claim a whole directory (W&B, MLflow) before its files
are looked at one by one. Adding a format: one module with a class that has ``name``, ``sniff`` and ``read``
(or ``claims`` and ``read_dir``), and its row in :data:`trainprobe.plugins.LOG_READERS` (or
``RUN_DIR_READERS``): ``"module:Class"`` and what it reads, which ``logs --help`` lists."""

from __future__ import annotations

from trainprobe.metrics.readers.base import LogReader, ReadOptions, RunDirReader
from trainprobe.plugins import LOG_READERS, RUN_DIR_READERS, instances

READERS: tuple[LogReader, ...] = instances(__name__, LOG_READERS)
DIR_READERS: tuple[RunDirReader, ...] = instances(__name__, RUN_DIR_READERS)

__all__ = ["DIR_READERS", "READERS", "LogReader", "ReadOptions", "RunDirReader"]
