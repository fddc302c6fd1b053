"""``triage``: one answer for a run directory: what went wrong, when, why, and which checkpoint to resume
from.

    >>> report = triage("runs/exp3")                 # or triage("/scratch/exp3", on="ssh=gpu07")
    >>> [(c.cause, c.step, c.confidence) for c in report.conclusions], report.resume_from

- :func:`collect` finds the logs and checkpoints under a directory and runs the log detectors
  (``trainprobe.metrics``), ``scan`` and ``check`` (``trainprobe.checkpoint``) on them; it imports only the
  standard library and numpy, and is what runs on the far side with ``on=``.
- :func:`conclude` joins its JSON on one timeline and names causes: :class:`TriageReport` (``to_json``).
- :func:`render_triage_html` is the self-contained HTML report (the logs report plus the checkpoint timeline).
"""

from __future__ import annotations

from trainprobe.triage.api import collect_on, triage
from trainprobe.triage.collect import collect, find_run_files, step_from_name
from trainprobe.triage.conclude import (
    SCHEMA_VERSION,
    CheckpointInfo,
    Conclusion,
    TimelineItem,
    TriageReport,
    conclude,
)
from trainprobe.triage.html import render_triage_html

__all__ = [
    "SCHEMA_VERSION",
    "CheckpointInfo",
    "Conclusion",
    "TimelineItem",
    "TriageReport",
    "collect",
    "collect_on",
    "conclude",
    "find_run_files",
    "render_triage_html",
    "step_from_name",
    "triage",
]
