"""``check``: is each checkpoint unit one consistent snapshot? An evidence-based verdict, without torch.

A torn checkpoint mixes optimizer steps: ``torch.save`` copied storages one by one from live memory while
training went on, or a unit's files come from different saves. Its bytes are fine; only relations *between*
tensors and files show the tear. The modules:

- :mod:`.run`: the entry points (:func:`check_paths`, :func:`check_unit`...);
- :mod:`.part`: each part checked where it is read (a JSON-able :class:`~.part.PartCheck`), and
  :mod:`.unit`: the unit judged from its parts' checks alone (the one place a result is assembled);
- a unit checked on several machines (``check --on FLEET --sharded``): what each target runs and the pure
  merge into one report are :mod:`trainprobe.checkpoint.sharded`'s;
- :mod:`.report`: :class:`CheckResult`, :class:`CheckReport` and the verdict rule;
- :mod:`.structure`: param_groups, per-parameter step counters, state shapes;
- :mod:`.master`: bf16/fp16 copies equal the cast of their fp32 masters;
- :mod:`.writer_manifest`: the CheckpointWriter manifest; :mod:`.containers`: DCP chunk coverage;
- :mod:`.optimizers`: the optimizer families' own checks, one module each (Adam's bound there).

Everything here imports only the standard library, numpy and trainprobe.checkpoint (shipped to remote hosts).
"""

from __future__ import annotations

from trainprobe.checkpoint.check.optimizers.adam import adam_bound
from trainprobe.checkpoint.check.report import SCHEMA_VERSION, CheckReport, CheckResult
from trainprobe.checkpoint.check.run import check_path, check_paths, check_paths_json, check_unit

__all__ = [
    "SCHEMA_VERSION",
    "CheckReport",
    "CheckResult",
    "adam_bound",
    "check_path",
    "check_paths",
    "check_paths_json",
    "check_unit",
]
