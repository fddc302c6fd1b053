"""CSV files that frameworks write, told apart by their header (the table itself is read by
:func:`trainprobe.metrics.readers.csv.read_table`; the epoch column is the step axis, as
:mod:`trainprobe.metrics.axis` makes it for any log with no step column).

- Keras ``CSVLogger`` (any file name: its default is ``training.log``): ``epoch`` first, then the metrics
  and a ``val_`` twin of each;
- Ultralytics ``results.csv``: headers padded with spaces (``                  epoch,      train/box_loss``),
  ``metrics/mAP50(B)`` computed on the validation set, ``time`` the elapsed seconds;
- timm ``summary.csv``: ``epoch,train_loss,eval_loss,eval_top1,eval_top5,lr``.
"""

from __future__ import annotations

from pathlib import Path

from trainprobe.metrics.readers.base import ReadOptions
from trainprobe.metrics.readers.csv import csv_header, read_table
from trainprobe.metrics.table import RunLog


def _header(path: Path, head: bytes) -> list[str]:
    return [h.strip() for h in csv_header(path, head) or []]


class KerasCsvReader:
    name = "keras-csv"

    def sniff(self, path: Path, head: bytes) -> bool:
        header = _header(path, head)
        twins = [h for h in header if h.startswith("val_")]
        return (
            bool(header and twins)
            and header[0] == "epoch"
            and "step" not in header
            and all(t[4:] in header for t in twins)
        )

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        return read_table(path, name=path.stem, fmt="keras-csv")


class UltralyticsReader:
    name = "ultralytics"

    def sniff(self, path: Path, head: bytes) -> bool:
        header = _header(path, head)
        return "epoch" in header and any(h.startswith(("train/", "metrics/")) for h in header)

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        return read_table(path, name=path.parent.name or path.stem, fmt="ultralytics")


class TimmSummaryReader:
    name = "timm"

    def sniff(self, path: Path, head: bytes) -> bool:
        header = _header(path, head)
        return bool(header) and header[0] == "epoch" and "train_loss" in header and "eval_loss" in header

    def read(self, path: Path, options: ReadOptions) -> list[RunLog]:
        return read_table(path, name=path.parent.name or path.stem, fmt="timm")


__all__ = ["KerasCsvReader", "TimmSummaryReader", "UltralyticsReader"]
