"""torch.save's default format: a zip archive (stored, uncompressed) with ``<prefix>/data.pkl`` and one
record per storage at ``<prefix>/data/<key>``. Plain state dicts, Lightning (``state_dict`` +
``optimizer_states``) and DeepSpeed files are all this format; they differ only in the pickled object."""

from __future__ import annotations

import contextlib
import struct
from typing import Any

from trainprobe.checkpoint.reading.base import (
    Checkpoint,
    Note,
    PickleReadError,
    ReaderLimitError,
    Storage,
    check_tensor_count,
)
from trainprobe.checkpoint.reading.dtypes import lookup
from trainprobe.checkpoint.reading.formats._torchpickle import (
    PendingStorage,
    parse_storage_pid,
    records_with_notes,
)
from trainprobe.checkpoint.reading.mapping import map_file
from trainprobe.checkpoint.reading.pickle.unpickler import SUSPICIOUS, UNPICKLE_ERRORS, SafeUnpickler
from trainprobe.checkpoint.reading.zipcheck import (
    BufferWindow,
    RecordError,
    RecordProblem,
    entry_count,
    read_record,
    record_data_offset,
    record_problems,
)
from trainprobe.checkpoint.reading.zipdir import ZIP_STORED, Entry, central_directory
from trainprobe.errors import CorruptCheckpointError, UnknownFormatError

ZIP_MAGIC = b"PK\x03\x04"


def _declared_sizes(pickle_bytes: bytes) -> dict[str, int]:
    """Storage key -> bytes, as data.pkl declares them (element count x element size)."""
    sizes: dict[str, int] = {}

    def persistent_load(pid: Any) -> None:
        if isinstance(pid, tuple) and len(pid) >= 5 and isinstance(pid[4], int):
            info = lookup(getattr(pid[1], "dtype", "uint8"))
            sizes[str(pid[2])] = pid[4] * (info.itemsize if info else 1)

    with contextlib.suppress(*UNPICKLE_ERRORS):
        SafeUnpickler(pickle_bytes, source="data.pkl", persistent_load=persistent_load).load()
    return sizes


def truncation(buffer: Any, base: int, total: int) -> str | None:
    """Where a zip archive written front to back (as torch writes it) breaks off, from its local headers and
    data descriptors: "truncated at byte N of at least M (...)"; None when every record it starts is whole.

    torch writes each record's size in a data descriptor after its bytes; the size a cut-off storage record
    needed comes from data.pkl (element count x element size)."""
    view = memoryview(buffer)[base : base + total]
    pos = 0
    sizes: dict[str, int] = {}
    while pos + 30 <= total and bytes(view[pos : pos + 4]) == ZIP_MAGIC:
        flags = struct.unpack("<H", view[pos + 6 : pos + 8])[0]
        (size,) = struct.unpack("<I", view[pos + 18 : pos + 22])
        name_len, extra_len = struct.unpack("<HH", view[pos + 26 : pos + 30])
        name = bytes(view[pos + 30 : pos + 30 + name_len]).decode("utf-8", "replace")
        start = pos + 30 + name_len + extra_len
        if flags & 0x08:  # the size follows the data, in a descriptor
            found = buffer.find(b"PK\x07\x08", base + start, base + total) if start < total else -1
            end = found - base if found >= 0 else -1
            if end < 0:
                key = name.rsplit("/data/", 1)[1] if "/data/" in name else None
                need = start + sizes[key] if key is not None and key in sizes else None
                of = f" of at least {need:,}" if need is not None else ""
                return (
                    f"truncated at byte {total:,}{of} (inside record {name}, which starts at byte {start:,})"
                )
            if name.endswith("data.pkl"):
                sizes = _declared_sizes(bytes(view[start:end]))
            pos = end + 16
        else:
            if start + size > total:
                return f"truncated at byte {total:,} of at least {start + size:,} (inside record {name})"
            pos = start + size
    return None


def _index(infos: list[Entry]) -> tuple[dict[str, Entry], list[Note], str]:
    """Records by their full stored name, the first of a name winning (as torch's reader takes it); notes
    on duplicate names and names with a NUL byte; and the archive prefix torch uses (the first record's
    folder)."""
    by_name: dict[str, Entry] = {}
    notes: list[Note] = []
    dups: dict[str, int] = {}
    for info in infos:
        name = info.orig_filename
        if "\x00" in name:
            notes.append(
                Note(
                    SUSPICIOUS,
                    f"zip record name with a NUL byte: {name!r} (tools that cut names at the NUL read it as "
                    f"{info.filename}; torch does not)",
                )
            )
        if name in by_name:
            dups[name] = dups.get(name, 1) + 1
            continue
        by_name[name] = info
    for name, count in dups.items():
        notes.append(
            Note(
                SUSPICIOUS,
                f"the zip holds {count} records named {name} (torch reads the first, and so does trainprobe; "
                "a reader that takes the last sees different contents)",
            )
        )
    first = infos[0].orig_filename if infos else ""
    prefix = first.split("/", 1)[0] + "/" if "/" in first else ""
    return by_name, notes, prefix


def pickle_notes(data: bytes, source: str) -> list[Note]:
    """What a pickle names, when its objects are not needed (every pickle of a file is looked at)."""
    unpickler = SafeUnpickler(data, source=source, persistent_load=lambda _pid: None)
    with contextlib.suppress(*UNPICKLE_ERRORS):
        unpickler.load()
    return unpickler.notes


def _named(problem: RecordProblem, holders: dict[str, list[str]]) -> str:
    """A record's problem with the tensors that record holds (a CRC failure names the tensor, not data/3)."""
    names = holders.get(problem.record)
    if not names:
        return problem.message
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more views" if len(names) > 3 else "")
    return f"{problem.message}: it holds {shown}"


def _first_per_global(notes: list[Note]) -> list[Note]:
    """One note per (kind, global) over the archive's pickles (TorchScript's debug pickles repeat them)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for note in notes:
        key = (note.kind, note.global_name)
        if note.global_name and key in seen:
            continue
        seen.add(key)
        out.append(note)
    return out


def _may_be_a_pickle(buffer: Any, base: int, info: Entry, prefix: str, total: int) -> bool:
    """Whether a record other than data.pkl may be a pickle torch (or a tool) would load: any ``*.pkl``
    (TorchScript's constants.pkl), and any small record that starts with a pickle PROTO opcode, except the
    raw storages under ``data/``."""
    name = info.orig_filename
    if name.startswith(prefix + "data/") or info.file_size > (64 << 20):
        return False
    if name.endswith(".pkl"):
        return True
    if info.compress_type != ZIP_STORED or info.flag_bits & 0x1:
        return False  # torch itself never writes such a record
    try:
        start = record_data_offset(buffer, base, info)
    except ValueError:
        return False
    head = bytes(memoryview(buffer)[base + start : base + min(start + 2, total)])
    return len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5


def _directory(buffer: Any, path: str, base: int, total: int) -> list[Entry]:
    """The archive's records in directory order: read here when the archive is plain, else by ``zipfile``
    (imported only then: a safetensors scan, and most torch scans, never need it)."""
    count = entry_count(buffer, base, total)
    if count is not None:
        # A few records beside the storages (data.pkl, byteorder, version, ...); each storage holds a tensor.
        check_tensor_count(path, count - 16)
    plain = central_directory(buffer, base, total)
    if plain is not None:
        return list(plain)
    import zipfile

    try:
        with zipfile.ZipFile(BufferWindow(buffer, base, total)) as zf:
            return list(zf.infolist())
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError) as exc:
        where = truncation(buffer, base, total)
        if where is not None:
            raise CorruptCheckpointError(path, f"not a complete zip archive: {where}") from None
        raise CorruptCheckpointError(
            path, f"not a complete zip archive ({exc})", hint="the file is probably truncated"
        ) from None


def read_torch_zip(
    buffer: Any, path: str, base: int = 0, length: int | None = None
) -> tuple[Any, list[Any], list[Note], list[Any]]:
    """Read the torch zip archive at ``buffer[base:base+length]``: (skeleton, records, notes, verifiers).

    Used for whole files and for the torch.save blobs inside torch.distributed.checkpoint ``.distcp`` files.
    Records are looked up and read as torch does: ``<archive>/data.pkl`` where ``<archive>`` is the first
    record's folder, the first record of a name winning, CRC32s not checked on the way (``verify`` does);
    every other pickle in the archive is read for its globals.
    """
    total = len(buffer) - base if length is None else length
    infos, prefix, pkl_name, notes = _archive(buffer, path, base, total)
    order = infos.get(prefix + "byteorder")
    try:
        if order is not None and read_record(buffer, base, order, total).strip() not in (b"", b"little"):
            raise UnknownFormatError(path, "big-endian checkpoints are not supported")
        pickle_bytes = read_record(buffer, base, infos[pkl_name], total)
    except RecordError as exc:
        if exc.limit:
            raise ReaderLimitError(path, str(exc), notes=notes) from None
        raise PickleReadError(path, f"{pkl_name} cannot be read: {exc}", notes=notes) from None
    except ValueError as exc:  # no local header where the directory says
        raise PickleReadError(path, f"{pkl_name} cannot be read: {exc}", notes=notes) from None
    storages = _Storages(buffer, path, base, total, infos, prefix)
    unpickler = SafeUnpickler(pickle_bytes, source="data.pkl", persistent_load=storages.load)
    try:
        root = unpickler.load()
    except CorruptCheckpointError as exc:
        raise PickleReadError(path, exc.reason, notes=unpickler.notes + notes) from None
    except UNPICKLE_ERRORS as exc:
        raise PickleReadError(
            path,
            f"data.pkl cannot be unpickled safely ({type(exc).__name__}: {exc})",
            notes=unpickler.notes + notes,
        ) from None
    notes = _first_per_global(unpickler.notes + notes)
    skeleton, records, walk_notes = records_with_notes(root, path, unpickler.tensors, notes)
    notes.extend(walk_notes)

    holders: dict[str, list[str]] = {}
    for rec in records:
        holders.setdefault(prefix + rec.storage.key, []).append(rec.display_name)

    def verify() -> list[str]:
        return [_named(p, holders) for p in record_problems(buffer, base, total)]

    return skeleton, records, notes, [verify]


def _archive(buffer: Any, path: str, base: int, total: int) -> tuple[dict[str, Entry], str, str, list[Note]]:
    """The archive's records by name, its folder (``prefix``), the name of its ``data.pkl`` and the notes on
    the globals its other pickles name."""
    listed = _directory(buffer, path, base, total)
    infos, notes, prefix = _index(listed)
    pkl_name = prefix + "data.pkl"
    if pkl_name not in infos:
        candidates = [n for n in infos if n.endswith("/data.pkl") and n.count("/") == 1]
        if not candidates:
            raise UnknownFormatError(path, "a zip archive without data.pkl, not a torch checkpoint")
        pkl_name = candidates[0]
        prefix = pkl_name[: -len("data.pkl")]
    others = [i for i in listed if i is not infos[pkl_name]]
    for info in others:
        if _may_be_a_pickle(buffer, base, info, prefix, total):
            with contextlib.suppress(RecordError):  # torch cannot read it either: it runs nothing
                notes.extend(pickle_notes(read_record(buffer, base, info, total), info.orig_filename))
    return infos, prefix, pkl_name, _first_per_global(notes)


class _Storages:
    """``data.pkl``'s persistent loads: each storage key to its record's bytes in the archive (or why there
    are none), looked up once."""

    def __init__(
        self, buffer: Any, path: str, base: int, total: int, infos: dict[str, Entry], prefix: str
    ) -> None:
        self.buffer, self.path, self.base, self.total = buffer, path, base, total
        self.infos, self.prefix = infos, prefix
        self.loaded: dict[str, PendingStorage] = {}

    def load(self, pid: Any) -> PendingStorage:
        key, dtype, numel, _view = parse_storage_pid(pid, "data.pkl", self.path)
        if key not in self.loaded:
            self.loaded[key] = self._pending(key, dtype, numel)
        return self.loaded[key]

    def _pending(self, key: str, dtype: str, numel: int | None) -> PendingStorage:
        pending = PendingStorage(key, dtype, numel)
        info = self.infos.get(f"{self.prefix}data/{key}")
        if info is None:
            pending.missing_reason = f"the zip has no record {self.prefix}data/{key}"
            return pending
        if info.compress_type != ZIP_STORED:
            pending.missing_reason = f"record {info.filename} is compressed, which torch never writes"
            return pending
        try:
            start = record_data_offset(self.buffer, self.base, info)
        except ValueError as exc:
            pending.missing_reason = str(exc)
            return pending
        if start + info.file_size > self.total:
            pending.missing_reason = (
                f"truncated at byte {self.total:,} of at least {start + info.file_size:,} "
                f"(record {info.filename} needs bytes up to {start + info.file_size:,})"
            )
            return pending
        itemsize = lookup(dtype)
        pending.storage = Storage(
            buffer=self.buffer,
            offset=self.base + start,
            nbytes=info.file_size,
            key=f"data/{key}",
            file=self.path,
            declared_numel=numel,
            declared_itemsize=itemsize.itemsize if itemsize else None,
            crc32=info.CRC,
        )
        return pending


class TorchZipFormat:
    name = "torch-zip"

    def sniff(self, path: str, head: bytes) -> bool:
        return head.startswith(ZIP_MAGIC)

    def open(self, path: str) -> Checkpoint:
        buffer = map_file(path)
        skeleton, records, notes, verifiers = read_torch_zip(buffer, path)
        return Checkpoint(path, self.name, skeleton, records, notes, [buffer], verifiers)
