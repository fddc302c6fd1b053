"""torch.save's default format: a zip archive (stored, uncompressed) with ``<prefix>/data.pkl`` and one
record per storage at ``<prefix>/data/<key>``. Plain state dicts, Lightning (``state_dict`` +
``optimizer_states``) and DeepSpeed files are all this format; they differ only in the pickled object."""

from __future__ import annotations

import zipfile
from typing import Any

from trainprobe.checkpoint.base import Checkpoint, Note, Storage, map_file
from trainprobe.checkpoint.dtypes import lookup
from trainprobe.checkpoint.formats._torchpickle import PendingStorage, build_records, parse_storage_pid
from trainprobe.checkpoint.unpickler import UNPICKLE_ERRORS, SafeUnpickler
from trainprobe.checkpoint.zipcheck import BufferWindow, record_data_offset, verify_zip_crc
from trainprobe.errors import CorruptCheckpointError, UnknownFormatError

ZIP_MAGIC = b"PK\x03\x04"


def read_torch_zip(
    buffer: Any, path: str, base: int = 0, length: int | None = None
) -> tuple[Any, list[Any], list[Note], list[Any]]:
    """Read the torch zip archive at ``buffer[base:base+length]``: (skeleton, records, notes, verifiers).

    Used for whole files and for the torch.save blobs inside torch.distributed.checkpoint ``.distcp`` files.
    """
    total = len(buffer) - base if length is None else length
    try:
        zf = zipfile.ZipFile(BufferWindow(buffer, base, total))
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError) as exc:
        raise CorruptCheckpointError(
            path, f"not a complete zip archive ({exc})", hint="the file is probably truncated"
        ) from None
    with zf:
        infos = {info.filename: info for info in zf.infolist()}
        pkl_names = [n for n in infos if n.endswith("data.pkl") and n.count("/") == 1]
        if not pkl_names:
            raise UnknownFormatError(path, "a zip archive without data.pkl, not a torch checkpoint")
        prefix = pkl_names[0][: -len("data.pkl")]
        order = infos.get(prefix + "byteorder")
        try:
            if order is not None and zf.read(order).strip() not in (b"", b"little"):
                raise CorruptCheckpointError(path, "big-endian checkpoints are not supported")
            pickle_bytes = zf.read(pkl_names[0])
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError) as exc:
            raise CorruptCheckpointError(path, f"{pkl_names[0]} cannot be read ({exc})") from None

    storages: dict[str, PendingStorage] = {}

    def persistent_load(pid: Any) -> PendingStorage:
        key, dtype, numel, _view = parse_storage_pid(pid, "data.pkl", path)
        if key in storages:
            return storages[key]
        pending = PendingStorage(key, dtype, numel)
        info = infos.get(f"{prefix}data/{key}")
        if info is None:
            pending.missing_reason = f"the zip has no record {prefix}data/{key}"
        elif info.compress_type != zipfile.ZIP_STORED:
            pending.missing_reason = f"record {info.filename} is compressed, which torch never writes"
        else:
            try:
                start = record_data_offset(buffer, base, info)
            except ValueError as exc:
                pending.missing_reason = str(exc)
            else:
                if start + info.file_size > total:
                    pending.missing_reason = f"record {info.filename} is truncated"
                else:
                    itemsize = lookup(dtype)
                    pending.storage = Storage(
                        buffer=buffer,
                        offset=base + start,
                        nbytes=info.file_size,
                        key=f"data/{key}",
                        file=path,
                        declared_numel=numel,
                        declared_itemsize=itemsize.itemsize if itemsize else None,
                    )
        storages[key] = pending
        return pending

    unpickler = SafeUnpickler(pickle_bytes, source="data.pkl", persistent_load=persistent_load)
    try:
        root = unpickler.load()
    except CorruptCheckpointError:
        raise
    except UNPICKLE_ERRORS as exc:
        raise CorruptCheckpointError(
            path, f"data.pkl cannot be unpickled safely ({type(exc).__name__}: {exc})"
        ) from None
    skeleton, records = build_records(root, path)

    def verify() -> list[str]:
        return verify_zip_crc(buffer, base, total)

    return skeleton, records, unpickler.notes, [verify]


class TorchZipFormat:
    name = "torch-zip"

    def sniff(self, path: str, head: bytes) -> bool:
        return head.startswith(ZIP_MAGIC)

    def open(self, path: str) -> Checkpoint:
        buffer = map_file(path)
        skeleton, records, notes, verifiers = read_torch_zip(buffer, path)
        return Checkpoint(path, self.name, skeleton, records, notes, [buffer], verifiers)
