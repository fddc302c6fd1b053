"""Read training logs (any format, detected by content), find spikes, cliffs, stalls, non-finite and missing
values, and tie each to the event before it (a checkpoint save, a resume, an LR change).

    >>> report = analyze(["train.log"])
    >>> [(f.severity, f.kind, f.metric, f.step) for f in report.findings]
"""

from __future__ import annotations

from trainprobe.metrics.analyze import SCHEMA_VERSION, LogReport, Options, analyze
from trainprobe.metrics.events import Event
from trainprobe.metrics.findings import Finding
from trainprobe.metrics.reading import read_logs
from trainprobe.metrics.table import RunLog

__all__ = ["SCHEMA_VERSION", "Event", "Finding", "LogReport", "Options", "RunLog", "analyze", "read_logs"]
