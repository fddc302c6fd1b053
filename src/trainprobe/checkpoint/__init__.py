"""Read checkpoints without torch and without executing them: ``scan``, ``check``, ``diff``, per unit.

Imports only the standard library, numpy and ``trainprobe.errors``: this package is shipped as-is to remote
machines (``scan --on``, ``check --on``), which may have neither torch nor trainprobe.

- :func:`discover_units` turns paths into units: a file, or a directory a framework writes as one
  checkpoint (:mod:`trainprobe.checkpoint.units.frameworks`, one module per framework).
- :func:`open_checkpoint` opens a file or directory in any supported format into a :class:`Checkpoint`
  (skeleton object + :class:`TensorRecord` list, each a lazy strided view into a memory map).
- :func:`scan` checks paths for non-finite values and returns a :class:`ScanReport` (``to_json``/
  ``from_json``); :func:`trainprobe.checkpoint.check.check_paths` judges consistency;
  :func:`trainprobe.checkpoint.diff.diff_paths` compares two units.
- :mod:`trainprobe.checkpoint.verdict`: the one verdict vocabulary and exit-code rule of every command.
- :mod:`trainprobe.checkpoint.reading.pickle.globals`: the one rule for what a pickle global is.
- :func:`verify_zip_crc` checks a zip archive's CRC32s (torch writes them, never checks them).
"""

from __future__ import annotations

from trainprobe.checkpoint.numerics import NonFinite, Stats, compute_stats, count_nonfinite
from trainprobe.checkpoint.reading.base import Checkpoint, CheckpointFormat, Note, Storage, TensorRecord
from trainprobe.checkpoint.reading.formats import FORMATS, detect
from trainprobe.checkpoint.reading.formats import open_file as open_checkpoint
from trainprobe.checkpoint.reading.pickle.globals import KnownGlobal, classify_global
from trainprobe.checkpoint.reading.pickle.opaque import Opaque
from trainprobe.checkpoint.reading.pickle.unpickler import SafeUnpickler, safe_loads
from trainprobe.checkpoint.reading.zipcheck import verify_zip_crc
from trainprobe.checkpoint.scanning.report import (
    SCHEMA_VERSION,
    FileReport,
    ScanReport,
    TensorResult,
    UnitReport,
)
from trainprobe.checkpoint.scanning.run import scan
from trainprobe.checkpoint.units.discover import Unit, discover_units
from trainprobe.checkpoint.verdict import exit_code, worst

__all__ = [
    "FORMATS",
    "SCHEMA_VERSION",
    "Checkpoint",
    "CheckpointFormat",
    "FileReport",
    "KnownGlobal",
    "NonFinite",
    "Note",
    "Opaque",
    "SafeUnpickler",
    "ScanReport",
    "Stats",
    "Storage",
    "TensorRecord",
    "TensorResult",
    "Unit",
    "UnitReport",
    "classify_global",
    "compute_stats",
    "count_nonfinite",
    "detect",
    "discover_units",
    "exit_code",
    "open_checkpoint",
    "safe_loads",
    "scan",
    "verify_zip_crc",
    "worst",
]
