"""Log readers, one module each, tried in this order on a file's first bytes (the text reader accepts
anything that is not binary); run-directory readers claim a whole directory (W&B, MLflow) before its files
are looked at one by one. Adding a format: one module with a class that has ``name``, ``sniff`` and ``read``
(or ``claims`` and ``read_dir``), and one line below."""

from __future__ import annotations

from trainprobe.metrics.readers.base import LogReader, ReadOptions, RunDirReader
from trainprobe.metrics.readers.csv import CsvReader
from trainprobe.metrics.readers.csv_layouts import KerasCsvReader, TimmSummaryReader, UltralyticsReader
from trainprobe.metrics.readers.detectron2 import Detectron2Reader
from trainprobe.metrics.readers.jsonl import JsonlReader
from trainprobe.metrics.readers.megatron_golden import MegatronGoldenReader
from trainprobe.metrics.readers.mlflow import MlflowReader
from trainprobe.metrics.readers.mmengine import MmengineReader
from trainprobe.metrics.readers.tensorboard import TensorBoardReader
from trainprobe.metrics.readers.text import TextReader
from trainprobe.metrics.readers.trainer_state import TrainerStateReader
from trainprobe.metrics.readers.wandb_dir import WandbDirReader
from trainprobe.metrics.readers.wandb_records import WandbRecordsReader
from trainprobe.metrics.readers.yolo_results import YoloResultsReader

READERS: tuple[LogReader, ...] = (
    TensorBoardReader(),
    WandbRecordsReader(),
    TrainerStateReader(),
    MegatronGoldenReader(),
    Detectron2Reader(),
    MmengineReader(),
    JsonlReader(),
    KerasCsvReader(),
    UltralyticsReader(),
    TimmSummaryReader(),
    YoloResultsReader(),
    CsvReader(),
    TextReader(),
)

DIR_READERS: tuple[RunDirReader, ...] = (
    WandbDirReader(),
    MlflowReader(),
)

__all__ = ["DIR_READERS", "READERS", "LogReader", "ReadOptions", "RunDirReader"]
