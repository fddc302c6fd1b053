"""A part of a unit opened for reading, never raising for a bad file, and what a reader needs to know
around it: its framework and its role. Shared by ``scan``, ``check`` and the sharded reads.

Stdlib + numpy only (shipped with ``trainprobe.checkpoint``)."""

from __future__ import annotations

import os
from collections.abc import Collection

from trainprobe.checkpoint.reading.base import Checkpoint, Note, notes_of
from trainprobe.checkpoint.reading.formats import PROGRAM_ERRORS, open_file
from trainprobe.checkpoint.reading.parts import DCP, data_files, file_order, open_share
from trainprobe.checkpoint.units.frameworks import FRAMEWORKS, Framework, Role, framework_named
from trainprobe.checkpoint.verdict import CORRUPT, UNREADABLE
from trainprobe.errors import CheckpointError, CorruptCheckpointError, TrainprobeError

_ROLES = ("weights", "optimizer", "scheduler", "rng", "config", "metadata", "state")


def reason_of(exc: TrainprobeError) -> str:
    """The message without the path (the report already names the file), with its hint."""
    text = exc.reason if isinstance(exc, CheckpointError) else exc.message
    return f"{text} — {exc.hint}" if exc.hint else text


def open_part(
    path: str, *, files: Collection[str] | None = None, description: bytes | None = None
) -> tuple[Checkpoint | None, str | None, str, list[Note]]:
    """Open one part: (checkpoint, error, the error's verdict, notes kept from a failed read). Never
    raises for a bad file: a damaged one is ``corrupt``, one that is no checkpoint ``unreadable``.

    A part of several files (a DCP directory, an HF index) whose data files are not all here is read from
    those that are, and the missing ones are the error (corrupt) beside the checkpoint; ``files``: read only
    these data files (a share: the others are elsewhere), ``description`` the ``.metadata`` or index bytes
    if they are not here."""
    error: str | None = None
    try:
        described = (
            data_files(path, description=description)
            if files is not None or os.path.isdir(path) or path.endswith(".index.json")
            else None
        )
        if described is None:
            ckpt = open_file(path)
        else:
            folder = path if described.kind == DCP else os.path.dirname(path)
            if files is None:
                here = [f for f in described.files if os.path.isfile(os.path.join(folder, f))]
                missing = [f for f in described.files if f not in here]
                error = described.missing_error(missing) if missing else None
                ckpt = open_file(path) if not missing else open_share(path, here)
            else:
                ckpt = open_share(path, files, description=description)
            file_order(ckpt)
        return ckpt, error, CORRUPT, []
    except CorruptCheckpointError as exc:
        return None, reason_of(exc), CORRUPT, notes_of(exc)
    except TrainprobeError as exc:
        return None, reason_of(exc), UNREADABLE, notes_of(exc)
    except PROGRAM_ERRORS:
        raise
    except Exception as exc:  # a damaged file must not stop the scan of the others
        return None, f"cannot be read ({type(exc).__name__}: {exc})", CORRUPT, []


def part_role(role: str) -> Role:
    """A part's role as the frameworks name it (``state`` for one the report does not know)."""
    return role if role in _ROLES else "state"  # type: ignore[return-value]


def framework_of(name: str, ckpt: Checkpoint) -> Framework:
    """The framework of a unit; a single file's by what its object is (a Lightning .ckpt)."""
    if name != "file":
        return framework_named(name)
    return next(fw for fw in FRAMEWORKS if fw.knows(ckpt.objects))
