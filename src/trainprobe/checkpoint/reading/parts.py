"""A part that is several files: a DCP directory (``.metadata`` and one data file per rank) or a Hugging Face
``*.index.json`` and its shards. Which data files it consists of, and reading it from some of them.

A part is read whole when all its files are here; from a share of them when only some are (the others are
on other machines: ``scan --sharded``), or when some are missing — then the files that are here are still
read and the missing ones named (nothing lost). Either way its tensors are listed file by file, in file-name
order, so a part read in shares on several machines reports exactly what one read of all its files reports.
Stdlib + numpy only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from trainprobe.checkpoint.reading.base import Checkpoint
from trainprobe.checkpoint.reading.formats import open_file
from trainprobe.checkpoint.reading.formats.dcp import METADATA, DcpFormat
from trainprobe.checkpoint.reading.formats.hf_sharded import HfShardedFormat
from trainprobe.checkpoint.reading.pickle.opaque import Opaque
from trainprobe.checkpoint.reading.pickle.unpickler import UNPICKLE_ERRORS, SafeUnpickler
from trainprobe.checkpoint.safe_io import read_side

DCP, HF_INDEX = "dcp", "hf-index"


@dataclass(frozen=True)
class DataFiles:
    """The data files of a multi-file part: ``kind`` (dcp or hf-index), ``index`` (the file that describes
    the others: ``.metadata``, the index's name), ``files`` (sorted, relative to the part's folder) and, per
    file, the first tensor stored there (to name what a missing file held)."""

    kind: str
    index: str
    files: list[str]
    holding: dict[str, str] = field(default_factory=dict)

    def missing_error(self, missing: Collection[str]) -> str:
        """The sentence the readers say for missing data files."""
        what, more = ("data file", "") if self.kind == DCP else ("shard", " and others")
        return "; ".join(
            f"{what} {f} (holding {self.holding.get(f, '?')}{more}) is missing" for f in sorted(missing)
        )


def _fields(obj: Any) -> dict[str, Any]:
    return obj.fields() if isinstance(obj, Opaque) else {}


def dcp_metadata(path: str, metadata: bytes | None = None) -> Any:
    """A DCP directory's unpickled ``.metadata`` (inert placeholders); from ``metadata`` bytes if given."""
    if metadata is not None:
        import io

        return SafeUnpickler(io.BytesIO(metadata), source=METADATA).load()
    import io

    return SafeUnpickler(io.BytesIO(read_side(os.path.join(path, METADATA))), source=METADATA).load()


def data_files(path: str, *, description: bytes | None = None) -> DataFiles | None:
    """The data files of the part at ``path`` when it is a DCP directory or an HF index (``description``:
    the ``.metadata`` or index bytes, when not read here); None for a one-file part, or when the part's
    description cannot be read (the reader then says why)."""
    if path.endswith(".index.json"):
        try:
            if description is None:
                description = read_side(path)
            weight_map = json.loads(description)["weight_map"]
        except (OSError, ValueError, KeyError, TypeError, RecursionError, MemoryError):  # the reader says why
            return None
        if not isinstance(weight_map, dict):
            return None
        holding: dict[str, str] = {}
        for tensor, shard in weight_map.items():
            holding.setdefault(str(shard), str(tensor))
        return DataFiles(HF_INDEX, os.path.basename(path), sorted(holding), holding)
    if description is None and not (os.path.isdir(path) and os.path.isfile(os.path.join(path, METADATA))):
        return None
    try:
        meta = dcp_metadata(path, description)
    except OSError:
        return None
    except UNPICKLE_ERRORS:
        return None
    storage = _fields(meta).get("storage_data")
    if not isinstance(storage, dict):
        return None
    holding = {}
    for index, info in storage.items():
        rel = _fields(info).get("relative_path")
        if isinstance(rel, str) and rel and os.path.basename(rel) == rel:
            holding.setdefault(rel, str(_fields(index).get("fqn")))
    return DataFiles(DCP, METADATA, sorted(holding), holding)


def open_share(path: str, files: Collection[str], *, description: bytes | None = None) -> Checkpoint:
    """The part at ``path`` read from ``files`` of its data files only (raises as its reader does);
    ``description``: the ``.metadata`` or index bytes when they are not here."""
    if path.endswith(".index.json"):
        return HfShardedFormat(open_file).open(path, files=set(files), index=description)
    return DcpFormat().open(path, files=set(files), metadata=description)


def file_order(ckpt: Checkpoint) -> None:
    """A multi-file part's records file by file, in file-name order (stable inside each file), and its
    notes once each, sorted: what any split of its files into shares gives again when merged."""
    ckpt.records.sort(key=lambda r: os.path.basename(r.file))
    ckpt.notes[:] = sorted(dict.fromkeys(ckpt.notes), key=lambda n: (n.kind, n.message))
