"""torch.distributed.checkpoint directories: a ``.metadata`` pickle and ``*.distcp`` data files.

``.metadata`` pickles a ``Metadata`` dataclass: ``state_dict_metadata`` (fqn -> tensor or bytes metadata),
``planner_data`` (fqn -> the key path in the original state dict) and ``storage_data`` (``MetadataIndex(fqn,
chunk offset)`` -> ``_StorageInfo(relative_path, offset, length)``). Each byte range in a ``.distcp`` file
is itself a torch.save zip archive: one tensor chunk, or one pickled non-tensor value. All of it is read with
the safe unpickler; the dataclasses stay inert placeholders whose fields we read."""

from __future__ import annotations

import io
import os
from collections.abc import Collection
from typing import Any

from trainprobe.checkpoint.base import Checkpoint, Note, Opaque, TensorRecord, map_file
from trainprobe.checkpoint.formats.torch_zip import read_torch_zip
from trainprobe.checkpoint.naming import map_optimizer_params
from trainprobe.checkpoint.unpickler import UNPICKLE_ERRORS, SafeUnpickler
from trainprobe.errors import CorruptCheckpointError

METADATA = ".metadata"


def _fields(obj: Any) -> dict[str, Any]:
    return obj.fields() if isinstance(obj, Opaque) else {}


def _listify(node: Any) -> Any:
    """Nested dicts whose keys are exactly 0..n-1 (ints) were lists in the original state dict."""
    if isinstance(node, dict):
        node = {k: _listify(v) for k, v in node.items()}
        if node and all(isinstance(k, int) for k in node) and sorted(node) == list(range(len(node))):
            return [node[i] for i in range(len(node))]
    return node


class DcpFormat:
    name = "torch-dcp"

    def sniff(self, path: str, head: bytes) -> bool:
        return os.path.isdir(path) and os.path.isfile(os.path.join(path, METADATA))

    def open(
        self, path: str, *, files: Collection[str] | None = None, metadata: bytes | None = None
    ) -> Checkpoint:
        """With ``files``, only the items stored in those data files are read (a node's share of a checkpoint
        spread over node-local disks: the others are elsewhere, not missing); ``metadata``: the ``.metadata``
        bytes when the directory here lacks them."""
        meta_path = os.path.join(path, METADATA)
        try:
            with io.BytesIO(metadata) if metadata is not None else open(meta_path, "rb") as fh:
                unpickler = SafeUnpickler(fh, source=METADATA)
                meta = unpickler.load()
        except UNPICKLE_ERRORS as exc:
            raise CorruptCheckpointError(path, f"{METADATA} cannot be unpickled safely ({exc})") from None
        notes: list[Note] = list(unpickler.notes)
        fields = _fields(meta)
        storage_data = fields.get("storage_data")
        planner = fields.get("planner_data") or {}
        if not isinstance(storage_data, dict):
            raise CorruptCheckpointError(path, f"{METADATA} has no storage_data table")
        ckpt = Checkpoint(path, self.name, None, [], notes)
        maps: dict[str, Any] = {}
        chunks_per_fqn: dict[str, int] = {}
        for index in storage_data:
            fqn = str(_fields(index).get("fqn"))
            chunks_per_fqn[fqn] = chunks_per_fqn.get(fqn, 0) + 1
        values: dict[str, Any] = {}
        try:
            for index, info in storage_data.items():
                idx, where = _fields(index), _fields(info)
                fqn = str(idx.get("fqn"))
                rel = str(where.get("relative_path", ""))
                if files is not None and rel not in files:
                    continue
                offset, length = where.get("offset"), where.get("length")
                if where.get("transform_descriptors"):
                    raise CorruptCheckpointError(
                        path, f"{fqn} is stored with transforms, which trainprobe cannot read"
                    )
                if (
                    not rel
                    or os.path.basename(rel) != rel
                    or not isinstance(offset, int)
                    or not isinstance(length, int)
                ):
                    raise CorruptCheckpointError(path, f"{METADATA} has a malformed storage entry for {fqn}")
                data_path = os.path.join(path, rel)
                if data_path not in maps:
                    if not os.path.isfile(data_path):
                        raise CorruptCheckpointError(path, f"data file {rel} (holding {fqn}) is missing")
                    maps[data_path] = map_file(data_path)
                    ckpt._resources.append(maps[data_path])
                buffer = maps[data_path]
                if offset + length > len(buffer):
                    raise CorruptCheckpointError(
                        path,
                        f"{rel} is truncated: {fqn} needs bytes up to {offset + length} of {len(buffer)}",
                    )
                obj, _records, sub_notes, verifiers = read_torch_zip(buffer, data_path, offset, length)
                ckpt._verifiers.extend(verifiers)
                for note in sub_notes:
                    ckpt.notes.append(Note(note.kind, f"{note.message} of {rel} ({fqn})"))
                if isinstance(obj, TensorRecord):
                    name = fqn
                    if chunks_per_fqn[fqn] > 1:
                        chunk_at = idx.get("offset") or ()
                        name = f"{fqn}@{','.join(str(int(o)) for o in chunk_at)}"
                    obj = TensorRecord(
                        name, obj.dtype, obj.shape, obj.stride, obj.storage_offset, obj.storage
                    )
                    ckpt.records.append(obj)
                    values.setdefault(fqn, []).append(obj)
                else:
                    values[fqn] = [obj]
        except BaseException:
            ckpt.close()
            raise
        root: dict[Any, Any] = {}
        for fqn, parts in values.items():
            value = parts[0] if len(parts) == 1 else parts
            keys = planner.get(fqn)
            keys = tuple(keys) if isinstance(keys, (tuple, list)) and keys else (fqn,)
            node = root
            for k in keys[:-1]:
                nxt = node.setdefault(k, {})
                if not isinstance(nxt, dict):
                    break
                node = nxt
            else:
                node[keys[-1]] = value
        ckpt.objects, ckpt.records = map_optimizer_params(_listify(root), ckpt.records)
        return ckpt
