"""Log readers, one module each, tried in this order on a file's first bytes (the text reader accepts
anything)."""

from __future__ import annotations

from trainprobe.metrics.readers.base import LogReader
from trainprobe.metrics.readers.csv import CsvReader
from trainprobe.metrics.readers.jsonl import JsonlReader
from trainprobe.metrics.readers.tensorboard import TensorBoardReader
from trainprobe.metrics.readers.text import TextReader
from trainprobe.metrics.readers.trainer_state import TrainerStateReader

READERS: tuple[LogReader, ...] = (
    TensorBoardReader(),
    TrainerStateReader(),
    JsonlReader(),
    CsvReader(),
    TextReader(),
)

__all__ = ["READERS", "LogReader"]
