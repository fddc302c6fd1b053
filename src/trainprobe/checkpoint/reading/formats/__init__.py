"""Checkpoint formats, one module each, behind :class:`trainprobe.checkpoint.reading.base.CheckpointFormat`.

To add a format: write a module with a class that has ``name``, ``sniff(path, head)`` and ``open(path)``,
and add its row to :data:`trainprobe.plugins.CHECKPOINT_FORMATS` (``"module:Class"`` and what it reads,
which ``scan --help`` lists). Detection asks each format in the rows' order, so more specific formats come
first."""

from __future__ import annotations

import os

from trainprobe.checkpoint.reading.base import Checkpoint, CheckpointFormat, brief
from trainprobe.errors import CheckpointError, CorruptCheckpointError, UnknownFormatError
from trainprobe.plugins import CHECKPOINT_FORMATS, instances

HEAD_BYTES = 4096


def read_head(path: str) -> bytes:
    if os.path.isdir(path):
        return b""
    from trainprobe.checkpoint.safe_io import require_regular

    require_regular(path)  # a FIFO or a device is never opened
    with open(path, "rb") as fh:
        return fh.read(HEAD_BYTES)


def detect(path: str) -> CheckpointFormat | None:
    """The format of ``path`` judged by its content (a directory by what it contains), or None."""
    try:
        head = read_head(path)
    except OSError:
        return None
    for fmt in FORMATS:
        if fmt.sniff(path, head):
            return fmt
    return None


def open_file(path: str) -> Checkpoint:
    """Open a checkpoint file or directory in whatever format its content says."""
    try:
        head = read_head(path)
    except OSError as exc:
        raise CheckpointError(path, f"cannot be read ({exc.strerror or exc})") from None
    for fmt in FORMATS:
        if fmt.sniff(path, head):
            return _open_with(fmt, path)
    if not head:
        raise UnknownFormatError(
            path, "is empty" if not os.path.isdir(path) else "is not a checkpoint directory"
        )
    raise UnknownFormatError(
        path,
        "not a checkpoint format trainprobe reads",
        hint="supported: torch zip and legacy (.pt/.pth/.bin/.ckpt), safetensors, *.index.json, DCP dirs, "
        "pickles",
    )


def _open_with(fmt: CheckpointFormat, path: str) -> Checkpoint:
    """``fmt.open(path)`` with every failure a CheckpointError: whatever a hostile or damaged file makes a
    reader raise is ``corrupt`` (named by the exception, chained for ``TRAINPROBE_DEBUG``), never a
    traceback in ``check``, ``diff`` or ``triage``."""
    try:
        return fmt.open(path)
    except CheckpointError:
        raise
    except OSError as exc:
        raise CheckpointError(path, f"cannot be read ({exc.strerror or exc})") from None
    except MemoryError as exc:
        raise CorruptCheckpointError(path, "cannot be read: it needs more memory than there is") from exc
    except RecursionError as exc:
        raise CorruptCheckpointError(path, "cannot be read: it is nested too deeply") from exc
    except PROGRAM_ERRORS:
        raise
    except Exception as exc:  # a reader's own check missed it: still one verdict, the cause chained
        raise CorruptCheckpointError(
            path, f"cannot be read ({type(exc).__name__}: {brief(str(exc), 120)})"
        ) from exc


# The registry, last: the HF index reader opens its shards with open_file, which asks the registry.
FORMATS: tuple[CheckpointFormat, ...] = instances(
    __name__, CHECKPOINT_FORMATS, {"hf_sharded:HfShardedFormat": (open_file,)}
)

#: what no file's bytes can cause: our own bug, which must surface as one, never as a "corrupt" verdict
PROGRAM_ERRORS = (NameError, ImportError, SyntaxError)

__all__ = ["FORMATS", "PROGRAM_ERRORS", "detect", "open_file"]
