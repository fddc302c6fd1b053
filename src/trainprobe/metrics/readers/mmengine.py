"""OpenMMLab's JSON logs: mmdetection 2.x ``<time>.log.json`` (a line per log interval with ``mode``
``train`` or ``val``, ``epoch`` and ``iter`` within the epoch; the first line holds ``env_info`` and the
config) and mmengine's ``vis_data/scalars.json`` (``step``, and eval results under ``<metric>/<name>`` keys
such as ``coco/bbox_mAP``). ``val`` rows and eval results are eval series (``eval/…``); in an epoch-based
run mmengine writes the eval rows' ``step`` as the epoch, so they become a run of their own on that axis
(:mod:`trainprobe.metrics.axis`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.readers.json_values import Row, flatten
from trainprobe.metrics.readers.jsonl import head_object, read_json_lines
from trainprobe.metrics.splits import EVAL_PREFIX
from trainprobe.metrics.table import RunLog

_AXIS = ("epoch", "iter", "step")


def row_of(obj: dict[str, Any]) -> Row | None:
    mode = obj.get("mode")
    if "env_info" in obj or "config" in obj:
        return None
    row = flatten({k: v for k, v in obj.items() if k != "mode"})
    if not row:
        return None
    is_eval = mode in ("val", "test") or (mode is None and "loss" not in row and "lr" not in row)
    if not is_eval:
        return row
    return {(k if k in _AXIS else EVAL_PREFIX + k): v for k, v in row.items()}


class MmengineReader:
    name = "mmengine"

    def sniff(self, path: Path, head: bytes) -> bool:
        obj = head_object(head)
        if obj is None:
            return False
        if "env_info" in obj or obj.get("mode") in ("train", "val"):
            return True
        return path.name == "scalars.json" and "step" in obj

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        return [read_json_lines(path, name=path.stem, fmt="mmengine", row_of=row_of, bulk=False)]


__all__ = ["MmengineReader", "row_of"]
