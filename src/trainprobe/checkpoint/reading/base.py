"""The reader contract: what a checkpoint format hands to ``scan``, ``check`` and ``diff``.

A format (one module in ``trainprobe.checkpoint.reading.formats``) opens a path into a :class:`Checkpoint`:
the object skeleton as the file describes it (dicts, lists, numbers, strings, :class:`Opaque` placeholders)
with a :class:`TensorRecord` wherever a tensor was, plus the flat list of those records. A record points into
a memory map of the file; :meth:`TensorRecord.array` is a strided numpy view, so nothing is read until it is
looked at.

Everything in ``trainprobe.checkpoint`` imports only the standard library and numpy (it is shipped to remote
machines that may have neither torch nor trainprobe installed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import reprlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from trainprobe.checkpoint.reading.dtypes import DType, element_count_factor, lookup
from trainprobe.errors import CheckpointError, CorruptCheckpointError, UnknownFormatError

#: The most dimensions a tensor may have (numpy 1's limit; torch checkpoints stay far below it).
MAX_NDIM = 32
#: The most tensors one file (or one DCP directory) may name. Each costs a few kB to check (100,000: about
#: 350 MB and 10 s for ``scan`` on 2 cores); a header of a million empty tensors is refused instead of read.
#: ``TRAINPROBE_MAX_TENSORS`` raises it.
MAX_TENSORS = 100_000
#: A view may show each stored element at most this many times on average before :meth:`TensorRecord.array`
#: refuses to walk it (a 1.5 kB ``expand`` of 10^15 elements would take days).
MAX_REPEAT = 16
# An element offset or byte size this large is no file's (and would overflow numpy's strides).
_MAX_EXTENT = 1 << 62


def max_tensors() -> int:
    """:data:`MAX_TENSORS`, or ``TRAINPROBE_MAX_TENSORS`` when set to a number."""
    value = os.environ.get("TRAINPROBE_MAX_TENSORS", "")
    return int(value) if value.isdigit() else MAX_TENSORS


class ReaderLimitError(CheckpointError):
    """A file asks for more work than a reader does (more tensors than :func:`max_tensors`, a pickle that
    inflates past its cap): not judged, so ``unreadable`` (exit 2), with the limit named. ``notes`` keeps
    what the file's pickles named before the limit was met (a suspicious global still counts)."""

    def __init__(self, path: str, message: str, *, hint: str | None = None, notes: Any = None) -> None:
        super().__init__(path, message, hint=hint)
        self.notes: list[Any] = list(notes or [])


def check_tensor_count(path: str, count: int) -> None:
    """Raise ReaderLimitError when a file names more tensors than :func:`max_tensors`."""
    limit = max_tensors()
    if count > limit:
        raise ReaderLimitError(
            path,
            f"names {count:,} tensors, more than the {limit:,} trainprobe reads in one file",
            hint="set TRAINPROBE_MAX_TENSORS to read it anyway",
        )


class _Brief(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        # repr() of a 5,000-digit int raises ValueError on Python 3.11 (and takes quadratic time on 3.10).
        if x.bit_length() > 128:
            return f"<a {x.bit_length():,}-bit integer>"
        return repr(x)


_BRIEF = _Brief()
_BRIEF.maxlevel = 3
_BRIEF.maxstring = 60
_BRIEF.maxother = 60


def brief(value: Any, limit: int = 80) -> str:
    """A short repr of anything a file produced, for messages: bounded in length, depth and time, never
    raising (a deep list, a huge integer, a placeholder whose repr fails)."""
    try:
        text = _BRIEF.repr(value)
    except Exception:  # a value's own __repr__ may fail: the message must not
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


_T = TypeVar("_T")


class _cached(Generic[_T]):
    """A property computed once per instance and kept in its ``__dict__`` (which then answers: this is a
    non-data descriptor). For frozen dataclasses, whose fields cannot change under it."""

    def __init__(self, compute: Callable[[Any], _T]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __get__(self, obj: Any, owner: type | None = None) -> _T:
        value = self.compute(obj)
        obj.__dict__[self.name] = value
        return value


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

    # Cached (the record is frozen): the scan asks for these a dozen times per tensor, and for a checkpoint
    # of 8,000 small tensors recomputing them cost 10% of its time. (Not functools.cached_property: on
    # Python 3.11 it takes a lock on every first use, which cost as much again.)
    @_cached
    def dtype_info(self) -> DType | None:
        return lookup(self.dtype)

    @_cached
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @_cached
    def itemsize(self) -> int:
        info = self.dtype_info
        return info.itemsize * element_count_factor(info) if info else 0

    @_cached
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

    def check_geometry(self) -> None:
        """Raise CorruptCheckpointError when the shape, stride or offset is no tensor's: more than
        :data:`MAX_NDIM` dimensions, a negative size or offset, sizes or strides that overflow."""
        problem = None
        shape = self.shape
        # min() in C rather than a generator: this runs for every tensor (twice in a scan).
        if len(shape) != len(self.stride):
            problem = f"has shape {list(shape)} but stride {list(self.stride)}"
        elif len(shape) > MAX_NDIM:
            problem = f"has {len(shape)} dimensions (trainprobe reads up to {MAX_NDIM})"
        elif shape and min(shape) < 0:
            problem = f"has a negative size in its shape {list(shape)}"
        elif self.storage_offset < 0:
            problem = f"starts at a negative storage offset ({self.storage_offset:,})"
        elif self.dtype_info is None:
            problem = f"has dtype {brief(self.dtype, 40)}, unknown to trainprobe"
        elif self.numel and (
            self.numel >= _MAX_EXTENT
            or self.storage_offset * self.itemsize >= _MAX_EXTENT
            or (shape and max(abs(st) * (d - 1) for d, st in self._axes()) * self.itemsize >= _MAX_EXTENT)
        ):
            problem = f"has a shape or stride too large for any file ({brief(list(shape), 60)})"
        if problem is not None:
            raise CorruptCheckpointError(self.file, f"tensor {self.name} {problem}", hint="the header lies")

    def _axes(self) -> zip[tuple[int, int]]:
        return zip(self.shape, self.stride, strict=True)

    def check_bounds(self) -> None:
        """Raise CorruptCheckpointError when the view is no tensor's (:meth:`check_geometry`) or reaches
        outside its storage (a lying header, a short record)."""
        self.check_geometry()
        lo, hi = self.byte_span()
        if lo < 0 or hi > self.storage.nbytes:
            raise CorruptCheckpointError(
                self.file,
                f"tensor {self.name} needs bytes [{lo}, {hi}) of its storage {self.storage.key!r}, "
                f"which holds only {self.storage.nbytes} bytes",
                hint="the file is truncated or its header lies about sizes",
            )

    def collapsed(self) -> tuple[TensorRecord, int]:
        """This tensor with every axis of stride 0 (``expand``) cut to size 1, and how many times each of
        the remaining elements repeats: (record, repeats). A tensor without such axes is itself, 1."""
        if not any(st == 0 and d > 1 for d, st in self._axes()):
            return self, 1
        repeats = 1
        shape = []
        for d, st in self._axes():
            if st == 0 and d > 1:
                repeats *= d
                d = 1
            shape.append(d)
        return dataclasses.replace(self, shape=tuple(shape)), repeats

    def array(self) -> np.ndarray[Any, Any]:
        """A read-only strided numpy view of the elements, straight into the mapped file.

        bfloat16 and float8 come back as uint16/uint8 views (numpy lacks them); complex32 as float16 pairs
        with a trailing axis of 2. A view of far more elements than its storage holds (:data:`MAX_REPEAT`
        times, with strides of 0 or that overlap) raises CorruptCheckpointError instead of being walked
        element by element: the NaN/Inf count reads such a tensor through :meth:`collapsed`."""
        self.check_bounds()
        stored = self.storage.nbytes // max(1, self.itemsize)
        if self.numel > max(MAX_REPEAT * stored, 1 << 24):
            raise CorruptCheckpointError(
                self.file,
                f"tensor {self.name} views {self.numel:,} elements of a storage that holds {stored:,}: more "
                "than trainprobe reads element by element",
                hint="its elements repeat (strides of 0 or that overlap); scan counts its NaN/Inf",
            )
        info = self.dtype_info
        assert info is not None  # check_bounds refused unknown dtypes
        np_dtype = np.dtype(info.numpy)
        elem = self.itemsize
        shape = tuple(self.shape)
        strides = tuple(s * elem for s in self.stride)
        if element_count_factor(info) == 2:
            shape += (2,)
            strides += (np_dtype.itemsize,)
        try:
            if self.numel == 0:
                return np.zeros(shape, dtype=np_dtype)
            arr: np.ndarray[Any, Any] = np.ndarray(
                shape,
                dtype=np_dtype,
                buffer=self.storage.buffer,
                offset=self.storage.offset + self.storage_offset * elem,
                strides=strides,
            )
        except (ValueError, TypeError, OverflowError) as exc:  # what check_geometry did not foresee
            raise CorruptCheckpointError(self.file, f"tensor {self.name} cannot be viewed ({exc})") from None
        arr.flags.writeable = False
        return arr


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
    """One checkpoint format. Register it by a row in ``trainprobe.plugins.CHECKPOINT_FORMATS``."""

    name: str

    def sniff(self, path: str, head: bytes) -> bool:
        """Whether ``path`` (a file or directory; ``head`` is a file's first bytes, empty for a directory)
        is ours."""
        ...

    def open(self, path: str) -> Checkpoint:
        """Open ``path``; raise CorruptCheckpointError (naming what is wrong) when it cannot be read."""
        ...
