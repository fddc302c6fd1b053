"""The one definition of the manifest :class:`trainprobe.save.CheckpointWriter` writes beside a checkpoint.

``step-00000100.pt.manifest.json``: ``format`` ("trainprobe-checkpoint-writer"), ``schema_version`` (1),
``step``, ``file`` (the checkpoint's name), ``bytes``, ``sha256``, ``created`` (UTC ISO time),
``all_finite`` and ``tensors`` ({dotted name: {dtype, shape, finite}}). The writer builds it with
:func:`build_manifest`; ``check`` reads it back with :func:`read_manifest` and validates it with
:func:`manifest_problems`. Stdlib only (shipped with ``trainprobe.checkpoint``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from trainprobe.checkpoint.safe_io import read_side
from trainprobe.conventions import MANIFEST_SUFFIX

MANIFEST_FORMAT = "trainprobe-checkpoint-writer"
MANIFEST_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Manifest:
    """What a manifest states about its checkpoint."""

    path: str
    step: int
    file: str | None
    bytes: int
    sha256: str


def manifest_path_of(checkpoint: str) -> str:
    return checkpoint + MANIFEST_SUFFIX


def build_manifest(
    *, step: int, file: str, size: int, sha256: str, created: str, tensors: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The manifest document for a checkpoint the writer just wrote."""
    return {
        "format": MANIFEST_FORMAT,
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "step": step,
        "file": file,
        "bytes": size,
        "sha256": sha256,
        "created": created,
        "all_finite": all(bool(t.get("finite", True)) for t in tensors.values()),
        "tensors": tensors,
    }


def read_manifest(checkpoint: str) -> Manifest | None:
    """The manifest beside ``checkpoint``; None when there is none. Raises ValueError when it is unreadable
    or not a CheckpointWriter manifest (the message says which)."""
    mpath = manifest_path_of(checkpoint)
    if not os.path.isfile(checkpoint) or not os.path.isfile(mpath):
        return None
    try:
        data = json.loads(read_side(mpath))
        if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
            raise ValueError("not a trainprobe manifest")
        return Manifest(mpath, int(data["step"]), data.get("file"), int(data["bytes"]), str(data["sha256"]))
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"manifest {mpath} is unreadable ({exc})") from None


def manifest_problems(checkpoint: str, manifest: Manifest, own_step: int | None) -> list[str]:
    """What disagrees between ``checkpoint`` and its manifest: size, sha256, file name, step."""
    problems = []
    actual = os.path.getsize(checkpoint)
    if actual != manifest.bytes:
        problems.append(f"file has {actual} bytes, manifest says {manifest.bytes}")
    else:
        sha = hashlib.sha256()
        with open(checkpoint, "rb") as fh:
            while chunk := fh.read(1 << 22):
                sha.update(chunk)
        if sha.hexdigest() != manifest.sha256:
            problems.append("sha256 differs from the manifest's: the file changed after it was written")
    if manifest.file not in (None, os.path.basename(checkpoint)):
        problems.append(f"manifest describes {manifest.file}, not {os.path.basename(checkpoint)}")
    if own_step is not None and own_step != manifest.step:
        problems.append(f"checkpoint says step {own_step}, manifest says {manifest.step}")
    return problems
