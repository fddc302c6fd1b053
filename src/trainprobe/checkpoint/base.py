"""The reader contract: what a checkpoint format hands to ``scan``, ``check`` and ``diff``.

A format (one module in ``trainprobe.checkpoint.formats``) opens a path into a :class:`Checkpoint`: the object
skeleton as the file describes it (dicts, lists, numbers, strings, :class:`Opaque` placeholders) with a
:class:`TensorRecord` wherever a tensor was, plus the flat list of those records. A record points into a
memory map of the file; :meth:`TensorRecord.array` is a strided numpy view, so nothing is read until it is
looked at.

Everything in ``trainprobe.checkpoint`` imports only the standard library and numpy (it is shipped to remote
machines that may have neither torch nor trainprobe installed).
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from trainprobe.checkpoint.dtypes import DType, element_count_factor, lookup
from trainprobe.errors import CorruptCheckpointError, UnknownFormatError


@dataclass(frozen=True, eq=False)
class Storage:
    """A byte range of a mapped file that holds one torch storage (or one safetensors tensor's data)."""

    buffer: Any  # an mmap.mmap (or bytes for tiny in-memory blobs); must support the buffer protocol
    offset: int
    nbytes: int
    key: str = ""  # the storage's name in its file: "data/3", a legacy storage key, a safetensors tensor name
    file: str = ""
    # The element count the file claims for this storage, when it says (torch pickles do); ``verify``
    # compares it.
    declared_numel: int | None = None
    declared_itemsize: int | None = None
    # The CRC32 the container stores for these bytes (a zip record's), when it has one: a free fingerprint.
    crc32: int | None = None


@dataclass(frozen=True)
class TensorRecord:
    """One tensor of a checkpoint, described but not loaded.

    ``name`` is the dotted path of the tensor in the saved object
    (``optimizer_state_dict.state.12.exp_avg_sq``);
    ``param_name`` names the model parameter an optimizer-state tensor belongs to when that is unambiguous
    (``model.layers.3.weight``). ``dtype`` is torch's name (``float32``, ``bfloat16``, ``float8_e4m3fn``...).
    ``stride`` and ``storage_offset`` are in elements, as torch counts them.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    storage: Storage = field(repr=False, compare=False)
    param_name: str | None = None
    is_parameter: bool = False

    @property
    def file(self) -> str:
        return self.storage.file

    @property
    def dtype_info(self) -> DType | None:
        return lookup(self.dtype)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        info = self.dtype_info
        return info.itemsize * element_count_factor(info) if info else 0

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize

    @property
    def display_name(self) -> str:
        return f"{self.name} ({self.param_name})" if self.param_name else self.name

    def byte_span(self) -> tuple[int, int]:
        """The [start, end) byte range of the storage this view touches, relative to the storage start."""
        if self.numel == 0:
            return (0, 0)
        size = self.itemsize
        lo = hi = self.storage_offset
        for dim, st in zip(self.shape, self.stride, strict=True):
            if st >= 0:
                hi += (dim - 1) * st
            else:
                lo += (dim - 1) * st
        return (lo * size, (hi + 1) * size)

    def check_bounds(self) -> None:
        """Raise CorruptCheckpointError when the view reaches outside its storage (a lying header, a short
        record)."""
        lo, hi = self.byte_span()
        if lo < 0 or hi > self.storage.nbytes:
            raise CorruptCheckpointError(
                self.file,
                f"tensor {self.name} needs bytes [{lo}, {hi}) of its storage {self.storage.key!r}, "
                f"which holds only {self.storage.nbytes} bytes",
                hint="the file is truncated or its header lies about sizes",
            )

    def array(self) -> np.ndarray[Any, Any]:
        """A read-only strided numpy view of the elements, straight into the mapped file.

        bfloat16 and float8 come back as uint16/uint8 views (numpy lacks them); complex32 as float16 pairs
        with a trailing axis of 2."""
        info = self.dtype_info
        if info is None:
            raise CorruptCheckpointError(
                self.file, f"tensor {self.name} has dtype {self.dtype}, unknown to trainprobe"
            )
        self.check_bounds()
        np_dtype = np.dtype(info.numpy)
        elem = self.itemsize
        shape = tuple(self.shape)
        strides = tuple(s * elem for s in self.stride)
        if element_count_factor(info) == 2:
            shape += (2,)
            strides += (np_dtype.itemsize,)
        if self.numel == 0:
            return np.zeros(shape, dtype=np_dtype)
        arr: np.ndarray[Any, Any] = np.ndarray(
            shape,
            dtype=np_dtype,
            buffer=self.storage.buffer,
            offset=self.storage.offset + self.storage_offset * elem,
            strides=strides,
        )
        arr.flags.writeable = False
        return arr


class Opaque:
    """An inert stand-in for an object of a class trainprobe does not reconstruct.

    The safe unpickler hands one of these (a subclass named after the global) for every class it does not
    know; whatever the pickle tries to do with it (call it, set its state, append items) is recorded, never
    executed."""

    __slots__ = ("args", "dict_items", "items", "kwargs", "state")
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    state: Any
    items: list[Any]
    dict_items: dict[Any, Any]
    module: str = ""
    qualname: str = ""
    # How often a pickle *called* this class (REDUCE ``cls(*args)``), which would run its constructor; NEWOBJ,
    # the way pickling an instance rebuilds it, only calls ``__new__``. Set per placeholder class.
    calls: int = 0

    def __new__(cls, *args: Any, **kwargs: Any) -> Opaque:
        obj = object.__new__(cls)
        obj.args = args
        obj.kwargs = kwargs
        obj.state = None
        obj.items = []
        obj.dict_items = {}
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Only a call reaches __init__ (pickle's NEWOBJ calls __new__ alone).
        self.args = args
        self.kwargs = kwargs
        if args or kwargs:
            type(self).calls += 1

    def __call__(self, *args: Any, **kwargs: Any) -> Opaque:
        # A pickle may call what an earlier call returned (getattr(__import__("os"), "system")(...)): inert.
        return type(self)(*args, **kwargs)

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def append(self, item: Any) -> None:
        self.items.append(item)

    def extend(self, items: Any) -> None:
        self.items.extend(items)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.dict_items[key] = value

    @property
    def global_name(self) -> str:
        return f"{self.module}.{self.qualname}"

    def fields(self) -> dict[str, Any]:
        """The object's attributes as the pickle gave them (a dataclass's fields, a Namespace's entries)."""
        st = self.state
        if isinstance(st, tuple) and len(st) == 2 and (st[0] is None or isinstance(st[0], dict)):
            merged: dict[str, Any] = dict(st[0] or {})
            if isinstance(st[1], dict):
                merged.update(st[1])
            return merged
        if isinstance(st, dict):
            return dict(st)
        return dict(self.kwargs)

    def __repr__(self) -> str:
        return f"<{self.global_name} (not loaded)>"


@dataclass(frozen=True)
class Note:
    """Something a reader noticed that is not a tensor: a suspicious global, an unsupported feature."""

    kind: str  # "suspicious-global", "pickled-class", "metadata-nonfinite", "unsupported", "warning"
    message: str
    global_name: str = ""  # the pickle global a suspicious-global or pickled-class note is about


def notes_of(exc: BaseException) -> list[Note]:
    """The notes a reader made before it failed (what a pickle named is reported even when it broke off)."""
    notes = getattr(exc, "notes", None)
    return list(notes) if isinstance(notes, list) else []


class UnsupportedWithNotes(UnknownFormatError):
    """A file trainprobe does not read (its tensors), with the notes on what its pickles name."""

    def __init__(self, path: str, message: str, *, notes: list[Note], hint: str | None = None) -> None:
        super().__init__(path, message, hint=hint)
        self.notes = notes


class PickleReadError(CorruptCheckpointError):
    """A pickle inside a checkpoint could not be read; ``notes`` keeps what it named before it broke off."""

    def __init__(self, path: str, message: str, *, notes: list[Note], hint: str | None = None) -> None:
        super().__init__(path, message, hint=hint)
        self.notes = notes


@dataclass
class Checkpoint:
    """An opened checkpoint: its skeleton (``objects``), its tensors (``records``) and what the reader
    noticed."""

    path: str
    format: str
    objects: Any
    records: list[TensorRecord]
    notes: list[Note] = field(default_factory=list)
    # The mmaps (and files) to release on close; records keep views into them.
    _resources: list[Any] = field(default_factory=list, repr=False)
    # Per-file reader hooks for --verify: each returns a list of problems.
    _verifiers: list[Any] = field(default_factory=list, repr=False)

    def __iter__(self) -> Iterator[TensorRecord]:
        return iter(self.records)

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def verify(self) -> list[str]:
        """Integrity problems: zip CRC32 mismatches, storages whose size disagrees with their element
        count."""
        problems: list[str] = []
        for check in self._verifiers:
            problems.extend(check())
        seen: set[int] = set()
        for rec in self.records:
            st = rec.storage
            if id(st) in seen:
                continue
            seen.add(id(st))
            if st.declared_numel is not None and st.declared_itemsize:
                want = st.declared_numel * st.declared_itemsize
                if want != st.nbytes:
                    problems.append(
                        f"storage {st.key!r} ({rec.name}) declares {st.declared_numel} elements "
                        f"({want} bytes) but its record holds {st.nbytes} bytes"
                    )
        return problems

    def close(self) -> None:
        for res in self._resources:
            # A numpy view may still refer to the map; it is then released when the last view goes.
            with contextlib.suppress(BufferError):
                res.close()
        self._resources.clear()


class CheckpointFormat(Protocol):
    """One checkpoint format. Register an instance in ``trainprobe.checkpoint.formats.FORMATS``."""

    name: str

    def sniff(self, path: str, head: bytes) -> bool:
        """Whether ``path`` (a file or directory; ``head`` is a file's first bytes, empty for a directory)
        is ours."""
        ...

    def open(self, path: str) -> Checkpoint:
        """Open ``path``; raise CorruptCheckpointError (naming what is wrong) when it cannot be read."""
        ...


def map_file(path: str) -> mmap.mmap | bytes:
    """A read-only memory map of ``path`` (an empty bytes object for an empty file, which cannot be
    mapped)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return b""
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


_PAGE = mmap.PAGESIZE


def page_releaser(buffer: Any) -> Callable[[int, int], None]:
    """For a file mapping: a function that drops the whole pages inside byte range ``[lo, hi)`` from this
    process's resident set. They stay in the page cache (a later read costs a minor fault, not I/O), so RSS
    stays at a few chunks whatever the checkpoint's size. A page only partly inside the range, which may hold
    a neighbouring tensor or record that another thread is reading, is kept; other buffers are left alone."""
    if not isinstance(buffer, mmap.mmap) or not hasattr(buffer, "madvise"):
        return lambda _lo, _hi: None

    def release(lo: int, hi: int) -> None:
        lo = -(-lo // _PAGE) * _PAGE
        hi = hi // _PAGE * _PAGE
        if hi > lo:
            with contextlib.suppress(OSError, ValueError):
                buffer.madvise(mmap.MADV_DONTNEED, lo, hi - lo)

    return release
