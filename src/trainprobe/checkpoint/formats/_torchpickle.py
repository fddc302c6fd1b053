"""What the torch zip and legacy readers share: turning the pickle's tensor descriptions into records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainprobe.checkpoint.base import Storage, TensorRecord
from trainprobe.checkpoint.dtypes import lookup
from trainprobe.checkpoint.naming import map_optimizer_params, name_tensors
from trainprobe.checkpoint.unpickler import StorageType, TensorRef
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
        raise CorruptCheckpointError(path, f"{source} has a persistent id that is not a storage: {pid!r:.80}")
    storage_type = pid[1]
    dtype = storage_type.dtype if isinstance(storage_type, StorageType) else "uint8"
    numel = pid[4] if isinstance(pid[4], int) else None
    view = pid[5] if len(pid) > 5 else None
    return str(pid[2]), dtype, numel, view


def build_records(root: Any, path: str) -> tuple[Any, list[TensorRecord]]:
    """Name every tensor of an unpickled torch object and attach its storage; map optimizer state to
    parameters."""

    def to_record(ref: TensorRef, name: str) -> TensorRecord:
        pending = ref.storage
        if not isinstance(pending, PendingStorage):
            raise CorruptCheckpointError(path, f"tensor {name} has no storage")
        if pending.storage is None:
            raise CorruptCheckpointError(path, f"tensor {name}: {pending.missing_reason}")
        if lookup(ref.dtype) is None:
            raise CorruptCheckpointError(path, f"tensor {name} has dtype {ref.dtype}, unknown to trainprobe")
        if len(ref.shape) != len(ref.stride):
            raise CorruptCheckpointError(path, f"tensor {name} has shape {ref.shape} but stride {ref.stride}")
        return TensorRecord(
            name=name,
            dtype=ref.dtype,
            shape=ref.shape,
            stride=ref.stride,
            storage_offset=ref.storage_offset,
            storage=pending.storage,
            is_parameter=ref.is_parameter,
        )

    skeleton, records = name_tensors(root, to_record)
    return map_optimizer_params(skeleton, records)
