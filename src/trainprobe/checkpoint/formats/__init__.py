"""Checkpoint formats, one module each, behind :class:`trainprobe.checkpoint.base.CheckpointFormat`.

To add a format: write a module with a class that has ``name``, ``sniff(path, head)`` and ``open(path)``,
and add one instance to ``FORMATS``. Detection asks each format in this order, so more specific formats come
first."""

from __future__ import annotations

import os

from trainprobe.checkpoint.base import Checkpoint, CheckpointFormat
from trainprobe.checkpoint.formats.dcp import DcpFormat
from trainprobe.checkpoint.formats.hf_sharded import HfShardedFormat
from trainprobe.checkpoint.formats.pickle_file import BarePickleFormat, TorchTarFormat
from trainprobe.checkpoint.formats.safetensors import SafetensorsFormat
from trainprobe.checkpoint.formats.torch_legacy import TorchLegacyFormat
from trainprobe.checkpoint.formats.torch_zip import TorchZipFormat
from trainprobe.errors import CheckpointError, UnknownFormatError

FORMATS: tuple[CheckpointFormat, ...] = (
    DcpFormat(),
    HfShardedFormat(),
    TorchZipFormat(),
    TorchLegacyFormat(),
    SafetensorsFormat(),
    TorchTarFormat(),
    # Last: a safetensors header length can begin with the bytes of a pickle PROTO opcode.
    BarePickleFormat(),
)

HEAD_BYTES = 4096


def read_head(path: str) -> bytes:
    if os.path.isdir(path):
        return b""
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
            try:
                return fmt.open(path)
            except OSError as exc:
                raise CheckpointError(path, f"cannot be read ({exc.strerror or exc})") from None
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


__all__ = ["FORMATS", "detect", "open_file"]
