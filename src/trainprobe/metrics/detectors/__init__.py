"""Detectors over one run's columns, each returning findings without event context (``analyze`` ties them
to events): :mod:`.spikes` (spikes, cliffs), :mod:`.trends` (divergence, overfitting, early explosion),
:mod:`.gaps` (non-finite and missing values, unfinished runs, stalls, slowdowns), :mod:`.lost_rows` (holes
in a series logged on a fixed grid). :mod:`.families` says how each kind of series is judged; :mod:`.noise`
keeps it to one finding per event (``analyze`` runs :func:`one_per_event` over a run's findings).

All of them are vectorized with numpy; the only Python loops run over *flagged* rows, which are few.
"""

from __future__ import annotations

from trainprobe.metrics.detectors.families import Family, family_of
from trainprobe.metrics.detectors.gaps import (
    detect_missing,
    detect_nonfinite,
    detect_stalls,
    detect_throughput,
    detect_unfinished,
    row_gaps,
)
from trainprobe.metrics.detectors.lost_rows import detect_lost_rows
from trainprobe.metrics.detectors.noise import one_per_event, outside_divergence
from trainprobe.metrics.detectors.overfitting import detect_overfitting
from trainprobe.metrics.detectors.spikes import SUSPECT_ROWS, detect_spikes, stretches
from trainprobe.metrics.detectors.trends import detect_divergence, detect_early_explosion
from trainprobe.metrics.roles import metric_kind

__all__ = [
    "SUSPECT_ROWS",
    "Family",
    "detect_divergence",
    "detect_early_explosion",
    "detect_lost_rows",
    "detect_missing",
    "detect_nonfinite",
    "detect_overfitting",
    "detect_spikes",
    "detect_stalls",
    "detect_throughput",
    "detect_unfinished",
    "family_of",
    "metric_kind",
    "one_per_event",
    "outside_divergence",
    "row_gaps",
    "stretches",
]
