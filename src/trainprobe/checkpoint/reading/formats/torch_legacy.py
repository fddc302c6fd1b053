"""torch.save(..., _use_new_zipfile_serialization=False): five pickles, then the raw storages.

Layout: the magic-number pickle, the protocol-version pickle, a sys-info pickle (endianness, type sizes), the
object pickle whose persistent ids name storages, a pickle of the sorted storage keys; then, per key in
that order, an 8-byte little-endian element count followed by ``count * element size`` bytes."""

from __future__ import annotations

import struct
from typing import Any

from trainprobe.checkpoint.reading.base import (
    Checkpoint,
    Note,
    PickleReadError,
    Storage,
    brief,
    notes_of,
)
from trainprobe.checkpoint.reading.dtypes import lookup
from trainprobe.checkpoint.reading.formats._torchpickle import (
    PendingStorage,
    parse_storage_pid,
    records_with_notes,
)
from trainprobe.checkpoint.reading.mapping import map_file
from trainprobe.checkpoint.reading.pickle.unpickler import UNPICKLE_ERRORS, SafeUnpickler, first_pickle
from trainprobe.errors import CheckpointError, CorruptCheckpointError, UnknownFormatError

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C


class TorchLegacyFormat:
    name = "torch-legacy"

    def sniff(self, path: str, head: bytes) -> bool:
        # Any pickle protocol: torch.load reads the magic number with a plain pickle.load.
        return bool(first_pickle(head) == MAGIC_NUMBER)

    def open(self, path: str) -> Checkpoint:
        buffer = map_file(path)
        try:
            return self._open(path, buffer)
        except BaseException:
            if hasattr(buffer, "close"):
                buffer.close()
            raise

    def _open(self, path: str, buffer: Any) -> Checkpoint:
        storages: dict[str, PendingStorage] = {}
        views: dict[str, tuple[str, int, int]] = {}

        def persistent_load(pid: Any) -> PendingStorage:
            key, dtype, numel, view = parse_storage_pid(pid, "the object pickle", path)
            if isinstance(view, tuple) and len(view) == 3:
                view_key = str(view[0])
                views[view_key] = (key, int(view[1]), int(view[2]))
                key = view_key
            if key not in storages:
                storages[key] = PendingStorage(key, dtype, numel)
            return storages[key]

        pickles = _Pickles(buffer)
        notes = pickles.notes
        try:
            magic = pickles.load("the magic-number pickle")
            if magic != MAGIC_NUMBER:
                raise CorruptCheckpointError(path, "not a torch legacy checkpoint (wrong magic number)")
            protocol = pickles.load("the protocol pickle")
            if protocol != 1001:
                raise UnknownFormatError(path, f"unsupported legacy protocol version {brief(protocol)}")
            sys_info = pickles.load("the sys-info pickle")
            if isinstance(sys_info, dict) and sys_info.get("little_endian") is False:
                raise UnknownFormatError(path, "big-endian checkpoints are not supported")
            root = pickles.load("the object pickle", persistent_load)
            keys = pickles.load("the storage-key pickle")
        except CheckpointError as exc:
            raise PickleReadError(path, exc.reason, notes=notes + notes_of(exc)) from None
        except UNPICKLE_ERRORS as exc:
            partial = pickles.current.notes if pickles.current is not None else []
            raise PickleReadError(
                path,
                f"the legacy pickles cannot be read ({type(exc).__name__}: {exc})",
                notes=notes + partial,
                hint="truncated?",
            ) from None
        if not isinstance(keys, list):
            raise CorruptCheckpointError(path, "the storage-key pickle is not a list")
        _place_storages(buffer, path, keys, storages, pickles.offset)
        _place_views(buffer, path, storages, views)
        skeleton, records, walk_notes = records_with_notes(root, path, pickles.built, notes)
        return Checkpoint(path, self.name, skeleton, records, notes + walk_notes, [buffer])


class _Pickles:
    """The file's pickles, one after the other: each starts where the one before ended; after the last come
    the raw storages (at ``offset``). ``notes`` and ``built`` gather what every pickle named and built;
    ``current`` is the one being read (for the notes of one that broke off)."""

    def __init__(self, buffer: Any) -> None:
        self.buffer = buffer
        self.offset = 0
        self.current: SafeUnpickler | None = None
        self.notes: list[Note] = []
        self.built: list[Any] = []

    def load(self, source: str, persistent_load: Any = None) -> Any:
        self.current = SafeUnpickler(
            self.buffer, source=source, persistent_load=persistent_load, start=self.offset
        )
        value = self.current.load()
        self.notes.extend(self.current.notes)
        self.built.extend(self.current.tensors)
        self.offset, self.current = self.current.end, None
        return value


def _place_storages(
    buffer: Any, path: str, keys: list[Any], storages: dict[str, PendingStorage], offset: int
) -> None:
    """Each storage's bytes, per key in the storage-key pickle's order from ``offset``: an 8-byte element
    count, then the elements. The first that does not fit says where the file was cut."""
    size = len(buffer)
    cut = ""
    for raw_key in keys:
        key = str(raw_key)
        pending = storages.get(key) or PendingStorage(key, "uint8", None)
        if cut:  # every storage after the cut is gone with it: the same truncation, not "not in the file"
            pending.missing_reason = f"{cut}; storage {key} came after it"
            continue
        info = lookup(pending.dtype)
        itemsize = info.itemsize if info else 1
        if offset + 8 > size:
            cut = pending.missing_reason = (
                f"truncated at byte {size:,} of at least {offset + 8:,} (before storage {key})"
            )
            continue
        (count,) = struct.unpack("<q", bytes(memoryview(buffer)[offset : offset + 8]))
        nbytes = count * itemsize
        if count < 0 or offset + 8 + nbytes > size:
            cut = pending.missing_reason = (
                f"truncated at byte {size:,} of at least {offset + 8 + nbytes:,} "
                f"(storage {key} needs {nbytes:,} bytes)"
            )
            continue
        pending.storage = Storage(
            buffer,
            offset + 8,
            nbytes,
            key=key,
            file=path,
            declared_numel=pending.declared_numel,
            declared_itemsize=itemsize,
        )
        offset += 8 + nbytes


def _place_views(
    buffer: Any, path: str, storages: dict[str, PendingStorage], views: dict[str, tuple[str, int, int]]
) -> None:
    """A storage that is a view of another (``(base key, byte offset, bytes)``) gets its bytes from that one;
    any other storage still without bytes is not in the file."""
    for key, pending in storages.items():
        if pending.storage is None and not pending.missing_reason:
            if key in views:
                base_key, byte_off, nbytes = views[key]
                base = storages.get(base_key)
                if base is not None and base.storage is not None:
                    b = base.storage
                    pending.storage = Storage(buffer, b.offset + byte_off, nbytes, key=key, file=path)
                    continue
                if base is not None and base.missing_reason:
                    pending.missing_reason = base.missing_reason
                    continue
            pending.missing_reason = f"storage {key} is not in the file"
