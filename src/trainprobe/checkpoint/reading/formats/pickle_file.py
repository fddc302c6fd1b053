"""What ``torch.load`` would unpickle although it is no torch checkpoint: a bare pickle, a pickle put in front
of a zip archive, and torch's pre-1.0 tar format.

``torch.load`` on a file that is not a zip archive reads a first pickle with a plain ``pickle.load`` (it
expects the legacy magic number and fails afterwards): whatever that pickle names runs first. These readers
unpickle the same bytes safely, so their globals are reported like any checkpoint's. A bare pickle's object
is the skeleton (it holds no tensors); the tar format's tensors are not read (it is reported as unreadable,
with its pickles' globals)."""

from __future__ import annotations

import contextlib
import io
import mmap

from trainprobe.checkpoint.reading.base import Checkpoint, Note, PickleReadError, UnsupportedWithNotes
from trainprobe.checkpoint.reading.mapping import map_file
from trainprobe.checkpoint.reading.pickle.unpickler import (
    UNPICKLE_ERRORS,
    SafeUnpickler,
    starts_like_a_pickle,
)

_TAR_MAGIC_AT = 257
_ZIP_MAGIC = b"PK\x03\x04"
_MEMBERS = ("sys_info", "pickle", "storages", "tensors")


class TorchTarFormat:
    """torch.save before torch 1.0 (``tarfile`` with ``sys_info``, ``storages``, ``tensors``, ``pickle``)."""

    name = "torch-tar"

    def sniff(self, path: str, head: bytes) -> bool:
        return head[_TAR_MAGIC_AT : _TAR_MAGIC_AT + 5] == b"ustar"

    def open(self, path: str) -> Checkpoint:
        import tarfile  # here: only this old format needs it (measured: ~2 ms of every scan)

        notes: list[Note] = []
        try:
            with tarfile.open(path, mode="r:") as tar:
                for member in tar.getmembers():
                    if member.name not in _MEMBERS or not member.isfile():
                        continue
                    fh = tar.extractfile(member)
                    if fh is None:
                        continue
                    # Only the first pickle of each member is read: after it come raw storage bytes.
                    notes.extend(_notes_of_first_pickle(fh.read(), f"tar member {member.name}"))
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise PickleReadError(path, f"a damaged tar archive ({exc})", notes=notes) from None
        raise UnsupportedWithNotes(
            path,
            "torch's pre-1.0 tar format: its pickles were read for what they name, its tensors are not read",
            notes=notes,
            hint="load it once with torch and save it again (torch.save writes the zip format)",
        )


def _notes_of_first_pickle(data: bytes, source: str) -> list[Note]:
    unpickler = SafeUnpickler(io.BytesIO(data), source=source, persistent_load=lambda _pid: None)
    with contextlib.suppress(*UNPICKLE_ERRORS):
        unpickler.load()
    return unpickler.notes


class BarePickleFormat:
    """A file that starts with a pickle and is no legacy checkpoint (the legacy format sniffs first)."""

    name = "pickle"

    def sniff(self, path: str, head: bytes) -> bool:
        return starts_like_a_pickle(head)

    def open(self, path: str) -> Checkpoint:
        buffer = map_file(path)
        try:
            unpickler = SafeUnpickler(buffer, source="the pickle", persistent_load=lambda _pid: None)
            try:
                obj = unpickler.load()
            except UNPICKLE_ERRORS as exc:
                raise PickleReadError(
                    path,
                    f"a pickle that cannot be read ({type(exc).__name__}: {exc})",
                    notes=unpickler.notes,
                ) from None
            end = unpickler.end
            rest = bytes(buffer[end : end + 4])
        finally:
            if isinstance(buffer, mmap.mmap):
                buffer.close()
        notes = unpickler.notes
        if rest.startswith(_ZIP_MAGIC):
            notes.append(
                Note(
                    "warning",
                    f"a zip archive follows the pickle at byte {end:,}: torch.load reads the pickle (running "
                    "what it names), not the zip",
                )
            )
        return Checkpoint(path, self.name, obj, [], notes)
