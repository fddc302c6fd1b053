"""Log readers, one module each, tried in this order on a file's first bytes (the text reader accepts
anything that is not binary); run-directory readers claim a whole directory (W&B, MLflow) before its files
are looked at one by one. Adding a format: one module with a class that has ``name``, ``sniff`` and ``read``
(or ``claims`` and ``read_dir``), and its ``"module:Class"`` row below."""

from __future__ import annotations

from trainprobe.metrics.readers.base import LogReader, ReadOptions, RunDirReader
from trainprobe.plugins import instances

#: file readers, "module:Class" under this package, in the order they are tried
_FILE_ROWS = (
    "tensorboard:TensorBoardReader",
    "wandb_records:WandbRecordsReader",
    "trainer_state:TrainerStateReader",
    "megatron_golden:MegatronGoldenReader",
    "detectron2:Detectron2Reader",
    "mmengine:MmengineReader",
    "jsonl:JsonlReader",
    "csv_layouts:KerasCsvReader",
    "csv_layouts:UltralyticsReader",
    "csv_layouts:TimmSummaryReader",
    "yolo_results:YoloResultsReader",
    "csv:CsvReader",
    "text:TextReader",
)
#: run-directory readers, likewise
_DIR_ROWS = ("wandb_dir:WandbDirReader", "mlflow:MlflowReader")

READERS: tuple[LogReader, ...] = instances(__name__, _FILE_ROWS)
DIR_READERS: tuple[RunDirReader, ...] = instances(__name__, _DIR_ROWS)

__all__ = ["DIR_READERS", "READERS", "LogReader", "ReadOptions", "RunDirReader"]
