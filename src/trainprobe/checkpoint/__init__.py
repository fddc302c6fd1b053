"""Read checkpoints without torch and without executing them; find NaN/Inf (``scan``).

Imports only the standard library, numpy and ``trainprobe.errors``: this package is shipped as-is to remote
machines (``scan --on``), which may have neither torch nor trainprobe.

- :func:`open_checkpoint` opens a file or directory in any supported format into a :class:`Checkpoint`
  (skeleton object + :class:`TensorRecord` list, each a lazy strided view into a memory map).
- :func:`scan` checks paths for non-finite values and returns a :class:`ScanReport`
(``to_json``/``from_json``).
- :func:`verify_zip_crc` checks a zip archive's CRC32s (torch writes them, never checks them).
"""

from __future__ import annotations

from trainprobe.checkpoint.base import Checkpoint, CheckpointFormat, Note, Opaque, Storage, TensorRecord
from trainprobe.checkpoint.discover import discover
from trainprobe.checkpoint.formats import FORMATS, detect
from trainprobe.checkpoint.formats import open_file as open_checkpoint
from trainprobe.checkpoint.numerics import NonFinite, Stats, compute_stats, count_nonfinite
from trainprobe.checkpoint.scan import SCHEMA_VERSION, FileReport, ScanReport, TensorResult, scan
from trainprobe.checkpoint.unpickler import SafeUnpickler, safe_loads
from trainprobe.checkpoint.zipcheck import verify_zip_crc

__all__ = [
    "FORMATS",
    "SCHEMA_VERSION",
    "Checkpoint",
    "CheckpointFormat",
    "FileReport",
    "NonFinite",
    "Note",
    "Opaque",
    "SafeUnpickler",
    "ScanReport",
    "Stats",
    "Storage",
    "TensorRecord",
    "TensorResult",
    "compute_stats",
    "count_nonfinite",
    "detect",
    "discover",
    "open_checkpoint",
    "safe_loads",
    "scan",
    "verify_zip_crc",
]
