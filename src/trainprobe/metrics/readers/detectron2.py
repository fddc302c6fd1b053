"""detectron2's ``metrics.json`` (``JSONWriter``): one JSON object per line with ``iteration`` and the
training scalars (``total_loss``, ``loss_cls``, ``lr``, ``data_time``, ``eta_seconds``…); evaluation results
arrive as rows of their own (``{"bbox/AP": 38.1, …, "iteration": 89999}``) and are eval series
(``eval/bbox/AP``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.readers.json_values import Row, flatten
from trainprobe.metrics.readers.jsonl import head_object, read_json_lines
from trainprobe.metrics.splits import EVAL_PREFIX
from trainprobe.metrics.table import RunLog

_TRAIN_MARKERS = ("total_loss", "data_time", "eta_seconds")


def row_of(obj: dict[str, Any]) -> Row | None:
    row = flatten(obj)
    if not row:
        return None
    if any(k in row for k in _TRAIN_MARKERS) or not any("/" in k for k in row):
        return row
    return {k if k == "iteration" else EVAL_PREFIX + k: v for k, v in row.items()}


class Detectron2Reader:
    name = "detectron2"

    def sniff(self, path: Path, head: bytes) -> bool:
        obj = head_object(head)
        return obj is not None and "iteration" in obj and any(k in obj for k in _TRAIN_MARKERS)

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        return [
            read_json_lines(
                path, name=path.parent.name or path.stem, fmt="detectron2", row_of=row_of, bulk=False
            )
        ]


__all__ = ["Detectron2Reader", "row_of"]
