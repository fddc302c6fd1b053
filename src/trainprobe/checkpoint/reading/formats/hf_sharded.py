"""Hugging Face sharded checkpoints: ``*.index.json`` with a ``weight_map`` from tensor name to shard file;
the shards are safetensors or torch zip ``.bin`` files. Scanned as one checkpoint, each tensor from its shard.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection

from trainprobe.checkpoint.reading.base import (
    Checkpoint,
    ReaderLimitError,
    TensorRecord,
    brief,
    check_tensor_count,
)
from trainprobe.checkpoint.safe_io import read_side
from trainprobe.errors import CorruptCheckpointError

# An index lists one line per tensor: 64 MB is several hundred thousand of them.
_MAX_INDEX = 64 << 20


class HfShardedFormat:
    """An HF ``*.index.json`` and the shards it names. ``open_shard`` opens one shard, whatever its format:
    the registry's ``open_file``, handed in so that this reader does not import the registry that lists it."""

    name = "hf-sharded"

    def __init__(self, open_shard: Callable[[str], Checkpoint]) -> None:
        self.open_shard = open_shard

    def sniff(self, path: str, head: bytes) -> bool:
        return path.endswith(".index.json") and b"weight_map" in head

    def open(
        self, path: str, *, files: Collection[str] | None = None, index: bytes | None = None
    ) -> Checkpoint:
        """With ``files``, only those shards are read (a node's share; the others are elsewhere); ``index``:
        the index's bytes when it is not here."""
        if (len(index) if index is not None else os.path.getsize(path)) > _MAX_INDEX:
            raise ReaderLimitError(path, f"an index of more than {_MAX_INDEX >> 20} MB")
        try:
            if index is None:
                index = read_side(path, _MAX_INDEX)
            document = json.loads(index)
            weight_map = document["weight_map"]
            if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
                raise TypeError
        except (OSError, ValueError, KeyError, TypeError, RecursionError, MemoryError):
            raise CorruptCheckpointError(
                path,
                "not a valid index: needs a JSON object with a weight_map of tensor names to shard files",
            ) from None
        check_tensor_count(path, len(weight_map))
        folder = os.path.dirname(path)
        ckpt = Checkpoint(path, self.name, {"metadata": document.get("metadata")}, [])
        wanted: dict[str, list[str]] = {}
        for tensor, shard in weight_map.items():
            if os.path.basename(shard) != shard or shard in ("", ".", ".."):
                # transformers looks for shards beside the index only; a path elsewhere is no shard of it
                raise CorruptCheckpointError(path, f"names a shard outside its folder: {brief(shard, 80)}")
            if files is None or shard in files:
                wanted.setdefault(shard, []).append(str(tensor))
        try:
            for shard, names in wanted.items():
                shard_path = os.path.join(folder, shard)
                if not os.path.isfile(shard_path):
                    raise CorruptCheckpointError(
                        path, f"shard {shard} (holding {names[0]} and others) is missing"
                    )
                part = self.open_shard(shard_path)
                ckpt._resources.append(part)
                ckpt._verifiers.append(part.verify)
                for note in part.notes:
                    ckpt.notes.append(note)
                by_name: dict[str, TensorRecord] = {}
                for rec in part.records:
                    by_name.setdefault(rec.name, rec)
                    ckpt.records.append(rec)
                    ckpt.objects[rec.name] = rec
                absent = [n for n in names if n not in by_name]
                if absent:
                    raise CorruptCheckpointError(
                        path,
                        f"{len(absent)} tensor(s) the index puts in {shard} are not there, e.g. {absent[0]}",
                    )
        except BaseException:
            ckpt.close()
            raise
        return ckpt
