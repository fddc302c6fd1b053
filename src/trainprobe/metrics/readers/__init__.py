"""Log readers, one module each, tried in this order on a file's first bytes (the text reader accepts
anything that is not binary); run-directory readers claim a whole directory (W&B, MLflow) before its files
are looked at one by one."""

from __future__ import annotations

from trainprobe.metrics.readers.base import LogReader, ReadOptions, RunDirReader
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

DIR_READERS: tuple[RunDirReader, ...] = ()

__all__ = ["DIR_READERS", "READERS", "LogReader", "ReadOptions", "RunDirReader"]
