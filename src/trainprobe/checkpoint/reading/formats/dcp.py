"""torch.distributed.checkpoint directories: a ``.metadata`` pickle and ``*.distcp`` data files.

``.metadata`` pickles a ``Metadata`` dataclass: ``state_dict_metadata`` (fqn -> tensor or bytes metadata),
``planner_data`` (fqn -> the key path in the original state dict) and ``storage_data`` (``MetadataIndex(fqn,
chunk offset)`` -> ``_StorageInfo(relative_path, offset, length)``). Each byte range in a ``.distcp`` file
is itself a torch.save zip archive: one tensor chunk, or one pickled non-tensor value. All of it is read with
the safe unpickler; the dataclasses stay inert placeholders whose fields we read."""

from __future__ import annotations

import heapq
import io
import os
from collections.abc import Collection
from typing import Any

from trainprobe.checkpoint.reading.base import Checkpoint, Note, TensorRecord, brief, check_tensor_count
from trainprobe.checkpoint.reading.formats.torch_zip import read_torch_zip
from trainprobe.checkpoint.reading.mapping import map_file
from trainprobe.checkpoint.reading.naming import map_optimizer_params
from trainprobe.checkpoint.reading.pickle.opaque import Opaque
from trainprobe.checkpoint.reading.pickle.unpickler import UNPICKLE_ERRORS, SafeUnpickler
from trainprobe.checkpoint.safe_io import read_side
from trainprobe.errors import CorruptCheckpointError

METADATA = ".metadata"


def _fields(obj: Any) -> dict[str, Any]:
    return obj.fields() if isinstance(obj, Opaque) else {}


# A state dict path longer than this (a planner entry of a thousand keys) is kept flat, under its fqn.
_MAX_KEYS = 32


def _text(value: Any) -> str:
    return value if isinstance(value, str) else brief(value, 80)


def _chunk_offsets(offsets: Any) -> str:
    if not isinstance(offsets, (tuple, list)):
        return "?"
    return ",".join(str(o) if isinstance(o, int) and abs(o) < 1 << 63 else "?" for o in offsets)


def _listify(node: Any) -> Any:
    """Nested dicts whose keys are exactly 0..n-1 (ints) were lists in the original state dict."""
    if isinstance(node, dict):
        node = {k: _listify(v) for k, v in node.items()}
        if node and all(isinstance(k, int) for k in node) and sorted(node) == list(range(len(node))):
            return [node[i] for i in range(len(node))]
    return node


Box = tuple[tuple[int, ...], tuple[int, ...]]  # a chunk: (offsets, sizes), one entry per dimension
#: Box comparisons :func:`overlapping_chunks` makes at most (a few seconds).
SWEEP_BUDGET = 5_000_000


def overlapping_chunks(chunks: list[Box], *, limit: int = 50) -> tuple[list[tuple[Box, Box]], bool]:
    """Pairs of chunks that overlap (at most ``limit``), by sort and sweep: chunks sorted by their start
    along the axis where starts differ most, each compared only with the chunks still open there. A tensor
    split along one axis into 40,000 chunks takes 40,000 comparisons, not 800 million. Returns (pairs,
    complete): ``complete`` is False when :data:`SWEEP_BUDGET` comparisons did not finish the sweep (chunks
    stacked on every axis at once, as no writer lays them out)."""
    if len(chunks) < 2 or not chunks[0][0]:
        return [], True
    ndim = len(chunks[0][0])
    axis = max(range(ndim), key=lambda k: len({c[0][k] for c in chunks}))
    ordered = sorted(chunks, key=lambda c: (c[0][axis], c[0]))
    open_ends: list[tuple[int, int]] = []  # (end along the axis, index into ordered): a heap
    active: set[int] = set()
    pairs: list[tuple[Box, Box]] = []
    budget = SWEEP_BUDGET
    for i, box in enumerate(ordered):
        start = box[0][axis]
        while open_ends and open_ends[0][0] <= start:
            active.discard(heapq.heappop(open_ends)[1])
        budget -= len(active)
        if budget < 0:
            return pairs, False
        for j in active:
            other = ordered[j]
            if all(
                ao < bo + bs and bo < ao + as_
                for ao, as_, bo, bs in zip(other[0], other[1], box[0], box[1], strict=True)
            ):
                pairs.append((other, box))
                if len(pairs) >= limit:
                    return pairs, True
        if box[1][axis] > 0:
            heapq.heappush(open_ends, (start + box[1][axis], i))
            active.add(i)
    return pairs, True


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
            with io.BytesIO(metadata) if metadata is not None else io.BytesIO(read_side(meta_path)) as fh:
                unpickler = SafeUnpickler(fh, source=METADATA)
                meta = unpickler.load()
        except UNPICKLE_ERRORS as exc:
            raise CorruptCheckpointError(path, f"{METADATA} cannot be unpickled safely ({exc})") from None
        notes: list[Note] = list(unpickler.notes)
        fields = _fields(meta)
        storage_data = fields.get("storage_data")
        planner = fields.get("planner_data")
        planner = planner if isinstance(planner, dict) else {}
        if not isinstance(storage_data, dict):
            raise CorruptCheckpointError(path, f"{METADATA} has no storage_data table")
        check_tensor_count(path, len(storage_data))
        ckpt = Checkpoint(path, self.name, None, [], notes)
        maps: dict[str, Any] = {}
        chunks_per_fqn: dict[str, int] = {}
        for index in storage_data:
            fqn = _text(_fields(index).get("fqn"))
            chunks_per_fqn[fqn] = chunks_per_fqn.get(fqn, 0) + 1
        values: dict[str, Any] = {}
        # A byte range named twice is read once (a tensor chunk; a pickled value is read each time, so the
        # skeleton stays a tree).
        tensors_at: dict[tuple[str, int, int], TensorRecord] = {}
        seen_notes: set[tuple[str, str]] = set()
        try:
            for index, info in storage_data.items():
                idx, where = _fields(index), _fields(info)
                fqn = _text(idx.get("fqn"))
                rel = where.get("relative_path", "")
                if files is not None and str(rel) not in files:
                    continue
                offset, length = where.get("offset"), where.get("length")
                if where.get("transform_descriptors"):
                    raise CorruptCheckpointError(
                        path, f"{fqn} is stored with transforms, which trainprobe cannot read"
                    )
                if (
                    not isinstance(rel, str)
                    or not rel
                    or os.path.basename(rel) != rel
                    or rel in (".", "..")
                    or not isinstance(offset, int)
                    or not isinstance(length, int)
                    or offset < 0
                    or length < 0
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
                obj: Any = tensors_at.get((rel, offset, length))
                if obj is None:
                    obj, _records, sub_notes, verifiers = read_torch_zip(buffer, data_path, offset, length)
                    ckpt._verifiers.extend(verifiers)
                    for note in sub_notes:
                        if (note.kind, note.message) not in seen_notes:
                            seen_notes.add((note.kind, note.message))
                            ckpt.notes.append(
                                Note(note.kind, f"{note.message} of {rel} ({fqn})", note.global_name)
                            )
                    if isinstance(obj, TensorRecord):
                        tensors_at[(rel, offset, length)] = obj
                if isinstance(obj, TensorRecord):
                    name = fqn
                    if chunks_per_fqn[fqn] > 1:
                        chunk_at = idx.get("offset")
                        name = f"{fqn}@{_chunk_offsets(chunk_at)}"
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
            keys = (
                tuple(keys)
                if isinstance(keys, (tuple, list))
                and 0 < len(keys) <= _MAX_KEYS
                and all(isinstance(k, (str, int)) for k in keys)
                else (fqn,)
            )
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
