"""YOLOv3/v5/v7 ``results.txt``: no header, one whitespace-aligned row per epoch of 15 columns

``     0/149    0.461G   0.07673    0.2323   0.02514    0.3342        84       640 0.0001716  0.002011 ...``

(epoch/last epoch, GPU memory, the train box/obj/cls/total losses, the label count, the image size,
precision, recall, mAP@.5, mAP@.5:.95, the val box/obj/cls losses). The columns take the names the later
``results.csv`` gives them (:class:`~trainprobe.metrics.readers.csv_layouts.UltralyticsReader`), so one run
reads the same whichever file it wrote; the label count and the image size are no series. A wide value
fills its ten-character field and touches the one before (``640 0.0001716``): the values are split on white
space, never on columns. A line of another shape (a second run's banner, a cut last line) is skipped and
counted.
"""

from __future__ import annotations

import re
from pathlib import Path

from trainprobe.metrics.axis import finish_run
from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.readers.text.chunks import LineChunks
from trainprobe.metrics.table import TOTAL_PREFIX, ColumnBuilder, RunLog, Unread

# after ``epoch/last``: None is a column that is no series
COLUMNS: tuple[str | None, ...] = (
    "gpu_mem",
    "train/box_loss",
    "train/obj_loss",
    "train/cls_loss",
    "train/total_loss",
    None,  # labels (targets) in the last batch
    None,  # image size
    "metrics/precision",
    "metrics/recall",
    "metrics/mAP_0.5",
    "metrics/mAP_0.5:0.95",
    "val/box_loss",
    "val/obj_loss",
    "val/cls_loss",
)
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_ROW = re.compile(rb"\s*(\d+)/(\d+)\s+(" + _NUM.encode() + rb")[GM]?((?:\s+" + _NUM.encode() + rb"){13})\s*")
_SAMPLES = 12


def _row(line: bytes) -> dict[str, float] | None:
    m = _ROW.fullmatch(line)
    if m is None:
        return None
    values = [float(m.group(3)), *(float(v) for v in m.group(4).split())]
    row = {"epoch": float(m.group(1)), TOTAL_PREFIX + "epoch": float(m.group(2))}
    row.update({name: v for name, v in zip(COLUMNS, values, strict=True) if name is not None})
    return row


class YoloResultsReader:
    name = "yolo-results"

    def sniff(self, path: Path, head: bytes) -> bool:
        lines = [line for line in head.split(b"\n")[:3] if line.strip()]
        return path.suffix == ".txt" and bool(lines) and _row(lines[0]) is not None

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        builder = ColumnBuilder()
        skipped = 0
        unread: list[Unread] = []
        line_no = 0
        chunks = LineChunks(path)
        for chunk in chunks:
            for line in chunk.split(b"\n"):
                line_no += 1
                if not line.strip():
                    continue
                row = _row(line)
                if row is None:
                    skipped += 1
                    if len(unread) < _SAMPLES:
                        text = line[:160].decode("utf-8", "replace")
                        unread.append(Unread(line_no, text, "not a results.txt row"))
                    continue
                builder.add_row(row)
        name = path.parent.name or path.stem
        run = finish_run(
            builder, name=name, path=str(path), fmt="yolo-results", skipped_lines=skipped + chunks.overlong
        )
        run.unread = unread
        return [run]


__all__ = ["COLUMNS", "YoloResultsReader"]
