"""``triage``: one answer for a run directory: what is broken where, what the logs show, what caused what, and
which checkpoint unit to resume from.

    >>> report = triage("runs/exp3")    # on a target: tasks.triage_on("ssh=gpu07", "/scratch/exp3")
    >>> report.answers["resume"]["lines"], [(c.cause, c.step) for c in report.conclusions]

- :func:`collect` finds the logs and checkpoint units under a directory, runs the log readers and detectors
  (``trainprobe.metrics``) and ``check`` (``trainprobe.checkpoint``) on them; it imports only the standard
  library and numpy, and is what runs on the far side for :func:`trainprobe.tasks.triage_on`.
- :func:`conclude` joins its JSON: units (:mod:`.units`), saves matched to units (:mod:`.saves`), causes
  (:mod:`.causes`), the four answers (:mod:`.answers`); :class:`TriageReport` (``to_json``, :mod:`.model`).
- :func:`render_triage_html` is the self-contained HTML report: the metric curves with saves, stalls and
  anomalies marked, and each unit's verdict on the same step axis.
"""

from __future__ import annotations

from trainprobe.triage.api import triage
from trainprobe.triage.collect import collect, find_run_files
from trainprobe.triage.conclude import conclude
from trainprobe.triage.html import render_triage_html
from trainprobe.triage.model import (
    SCHEMA_VERSION,
    CheckpointInfo,
    Conclusion,
    Disagreement,
    Duplicate,
    Problem,
    SaveMatch,
    TimelineItem,
    TriageReport,
)

__all__ = [
    "SCHEMA_VERSION",
    "CheckpointInfo",
    "Conclusion",
    "Disagreement",
    "Duplicate",
    "Problem",
    "SaveMatch",
    "TimelineItem",
    "TriageReport",
    "collect",
    "conclude",
    "find_run_files",
    "render_triage_html",
    "triage",
]
