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
        meta, notes = _read_metadata(path, metadata)
        fields = _fields(meta)
        storage_data = fields.get("storage_data")
        planner = fields.get("planner_data")
        planner = planner if isinstance(planner, dict) else {}
        if not isinstance(storage_data, dict):
            raise CorruptCheckpointError(path, f"{METADATA} has no storage_data table")
        check_tensor_count(path, len(storage_data))
        ckpt = Checkpoint(path, self.name, None, [], notes)
        chunks_per_fqn: dict[str, int] = {}
        for index in storage_data:
            fqn = _text(_fields(index).get("fqn"))
            chunks_per_fqn[fqn] = chunks_per_fqn.get(fqn, 0) + 1
        values: dict[str, Any] = {}
        items = _Items(ckpt)
        try:
            for index, info in storage_data.items():
                idx, where = _fields(index), _fields(info)
                fqn = _text(idx.get("fqn"))
                rel = where.get("relative_path", "")
                if files is not None and str(rel) not in files:
                    continue
                obj = items.read(fqn, rel, where)
                if isinstance(obj, TensorRecord):
                    name = fqn if chunks_per_fqn[fqn] == 1 else f"{fqn}@{_chunk_offsets(idx.get('offset'))}"
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
        ckpt.objects, ckpt.records = map_optimizer_params(
            _listify(_state_dict(values, planner)), ckpt.records
        )
        return ckpt


def _read_metadata(path: str, metadata: bytes | None) -> tuple[Any, list[Note]]:
    """The unpickled ``.metadata`` (or ``metadata``, its bytes from elsewhere) and what its pickle names."""
    meta_path = os.path.join(path, METADATA)
    try:
        with io.BytesIO(metadata) if metadata is not None else io.BytesIO(read_side(meta_path)) as fh:
            unpickler = SafeUnpickler(fh, source=METADATA)
            meta = unpickler.load()
    except UNPICKLE_ERRORS as exc:
        raise CorruptCheckpointError(path, f"{METADATA} cannot be unpickled safely ({exc})") from None
    return meta, list(unpickler.notes)


class _Items:
    """The items of one DCP directory read from their data files: each file mapped once, a byte range named
    twice read once (a tensor chunk; a pickled value is read each time, so the skeleton stays a tree), each
    note of the items' pickles kept once."""

    def __init__(self, ckpt: Checkpoint) -> None:
        self.ckpt = ckpt
        self.maps: dict[str, Any] = {}
        self.tensors_at: dict[tuple[str, int, int], TensorRecord] = {}
        self.seen_notes: set[tuple[str, str]] = set()

    def read(self, fqn: str, rel: Any, where: dict[str, Any]) -> Any:
        """The item ``fqn`` stored at ``where`` (a ``_StorageInfo``'s fields) in data file ``rel``."""
        path, ckpt = self.ckpt.path, self.ckpt
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
        buffer = self._mapped(rel, fqn)
        if offset + length > len(buffer):
            raise CorruptCheckpointError(
                path, f"{rel} is truncated: {fqn} needs bytes up to {offset + length} of {len(buffer)}"
            )
        obj: Any = self.tensors_at.get((rel, offset, length))
        if obj is None:
            obj, _records, sub_notes, verifiers = read_torch_zip(
                buffer, os.path.join(path, rel), offset, length
            )
            ckpt._verifiers.extend(verifiers)
            for note in sub_notes:
                if (note.kind, note.message) not in self.seen_notes:
                    self.seen_notes.add((note.kind, note.message))
                    ckpt.notes.append(Note(note.kind, f"{note.message} of {rel} ({fqn})", note.global_name))
            if isinstance(obj, TensorRecord):
                self.tensors_at[(rel, offset, length)] = obj
        return obj

    def _mapped(self, rel: str, fqn: str) -> Any:
        data_path = os.path.join(self.ckpt.path, rel)
        if data_path not in self.maps:
            if not os.path.isfile(data_path):
                raise CorruptCheckpointError(self.ckpt.path, f"data file {rel} (holding {fqn}) is missing")
            self.maps[data_path] = map_file(data_path)
            self.ckpt._resources.append(self.maps[data_path])
        return self.maps[data_path]


def _state_dict(values: dict[str, Any], planner: dict[Any, Any]) -> dict[Any, Any]:
    """The original state dict's nesting, from each item's key path in ``planner_data`` (flat, under its fqn,
    where the planner says nothing usable)."""
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
    return root
