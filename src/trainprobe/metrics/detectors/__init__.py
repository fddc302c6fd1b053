"""Detectors over one run's columns, each returning findings without event context (``analyze`` ties them
to events): :mod:`.spikes` (spikes, cliffs), :mod:`.trends` (divergence, overfitting, early explosion),
:mod:`.gaps` (non-finite and missing values, unfinished runs, stalls, slowdowns).

All of them are vectorized with numpy; the only Python loops run over *flagged* rows, which are few.
"""

from __future__ import annotations

from trainprobe.metrics.detectors.gaps import (
    detect_missing,
    detect_nonfinite,
    detect_stalls,
    detect_throughput,
    detect_unfinished,
    row_gaps,
)
from trainprobe.metrics.detectors.spikes import SUSPECT_ROWS, detect_spikes, stretches
from trainprobe.metrics.detectors.trends import detect_divergence, detect_early_explosion, detect_overfitting
from trainprobe.metrics.roles import metric_kind

__all__ = [
    "SUSPECT_ROWS",
    "detect_divergence",
    "detect_early_explosion",
    "detect_missing",
    "detect_nonfinite",
    "detect_overfitting",
    "detect_spikes",
    "detect_stalls",
    "detect_throughput",
    "detect_unfinished",
    "metric_kind",
    "row_gaps",
    "stretches",
]
