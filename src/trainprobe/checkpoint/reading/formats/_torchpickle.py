"""What the torch zip and legacy readers share: turning the pickle's tensor descriptions into records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainprobe.checkpoint.reading.base import (
    Note,
    PickleReadError,
    ReaderLimitError,
    Storage,
    TensorRecord,
    brief,
)
from trainprobe.checkpoint.reading.dtypes import lookup
from trainprobe.checkpoint.reading.naming import map_optimizer_params
from trainprobe.checkpoint.reading.pickle.rebuild import StorageType, TensorRef
from trainprobe.checkpoint.reading.pickle.unpickler import collector_paused
from trainprobe.checkpoint.reading.walk import name_tensors
from trainprobe.errors import CorruptCheckpointError


@dataclass(eq=False)
class PendingStorage:
    """A storage named by a persistent id; the reader fills ``storage`` (or leaves it None when it is
    missing)."""

    key: str
    dtype: str
    declared_numel: int | None
    storage: Storage | None = None
    missing_reason: str = ""


def parse_storage_pid(pid: Any, source: str, path: str) -> tuple[str, str, int | None, Any]:
    """('storage', StorageType, key, location, numel[, view_metadata]) -> (key, dtype, numel,
    view_metadata)."""
    if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
        raise CorruptCheckpointError(
            path, f"{source} has a persistent id that is not a storage: {brief(pid)}"
        )
    storage_type, key = pid[1], pid[2]
    if not (isinstance(key, str) or (isinstance(key, int) and 0 <= key < 1 << 63)):
        raise CorruptCheckpointError(path, f"{source} names a storage by {brief(key)}, not by its key")
    dtype = storage_type.dtype if isinstance(storage_type, StorageType) else "uint8"
    numel = pid[4] if isinstance(pid[4], int) and 0 <= pid[4] < 1 << 62 else None
    view = pid[5] if len(pid) > 5 else None
    return str(key), dtype, numel, view


def build_records(
    root: Any, path: str, built: list[TensorRef] | None = None
) -> tuple[Any, list[TensorRecord], list[Note]]:
    """Name every tensor of an unpickled torch object and attach its storage; map optimizer state to
    parameters. ``built`` (the unpickler's
    :attr:`~trainprobe.checkpoint.reading.pickle.unpickler.SafeUnpickler.tensors`):
    those no path of the object reaches are checked too, as ``<not reached>.<storage>``, with a note."""

    def to_record(ref: TensorRef, name: str) -> TensorRecord:
        pending = ref.storage
        if not isinstance(pending, PendingStorage):
            raise CorruptCheckpointError(path, f"tensor {name} has no storage")
        if not isinstance(pending.storage, Storage):
            raise CorruptCheckpointError(path, f"tensor {name}: {pending.missing_reason or 'no storage'}")
        if not isinstance(ref.dtype, str) or lookup(ref.dtype) is None:
            raise CorruptCheckpointError(
                path, f"tensor {name} has dtype {brief(ref.dtype, 40)}, unknown to trainprobe"
            )
        rec = TensorRecord(
            name=name,
            dtype=ref.dtype,
            shape=ref.shape,
            stride=ref.stride,
            storage_offset=ref.storage_offset,
            storage=pending.storage,
            is_parameter=ref.is_parameter,
        )
        rec.check_geometry()
        return rec

    with collector_paused():
        skeleton, records, unreached = name_tensors(root, to_record, built=built or (), path=path)
    notes: list[Note] = []
    if unreached:
        keys = [str(getattr(ref.storage, "key", "?")) for ref in unreached]
        records.extend(
            to_record(ref, f"<not reached>.{key}") for ref, key in zip(unreached, keys, strict=True)
        )
        shown = ", ".join(keys[:3]) + (" ..." if len(keys) > 3 else "")
        notes.append(
            Note(
                "warning",
                f"{len(unreached)} tensor(s) the pickle builds are not reachable from its object (storage "
                f"{shown}): checked as <not reached>.<storage>",
            )
        )
    skeleton, records = map_optimizer_params(skeleton, records)
    return skeleton, records, notes


def records_with_notes(
    root: Any, path: str, built: list[TensorRef], notes: list[Note]
) -> tuple[Any, list[TensorRecord], list[Note]]:
    """:func:`build_records` for a reader that already holds ``notes`` on what the file's pickles name: a
    limit it hits keeps them, a damaged object is a :class:`~..base.PickleReadError` that keeps them."""
    try:
        return build_records(root, path, built)
    except ReaderLimitError as exc:
        exc.notes = notes + exc.notes
        raise
    except CorruptCheckpointError as exc:
        raise PickleReadError(path, exc.reason, notes=notes) from None
