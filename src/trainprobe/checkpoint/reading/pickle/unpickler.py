"""An unpickler that never imports and never calls anything named by the file.

``find_class`` is the only door from a pickle to code. Here it answers from a fixed table: torch's tensor and
storage rebuild functions become our own functions that build :class:`TensorRef` descriptions, a few stdlib
containers are themselves, known data classes become inert :class:`Opaque` placeholders, and every other
global also becomes a placeholder *and* is reported (``suspicious global posix.system in data.pkl``). Nothing
is imported; nothing from the file runs."""

from __future__ import annotations

import _compat_pickle
import contextlib
import gc
import io
import pickle
from collections.abc import Callable, Iterator
from typing import Any

from trainprobe.checkpoint.reading.base import Note
from trainprobe.checkpoint.reading.dtypes import STORAGE_CLASSES, lookup
from trainprobe.checkpoint.reading.pickle.globals import KnownGlobal, classify_global
from trainprobe.checkpoint.reading.pickle.opaque import Opaque
from trainprobe.checkpoint.reading.pickle.opcodes import PickleShapeError, walk_pickle
from trainprobe.checkpoint.reading.pickle.rebuild import (
    REBUILDERS,
    TENSOR_BUILDERS,
    DTypeToken,
    StorageType,
    TensorRef,
)


def placeholder_class(module: str, name: str) -> type[Opaque]:
    """A fresh Opaque subclass standing for ``module.name``; building it records arguments, nothing else.

    Each unpickler makes its own, so what one pickle did with a class (called it, or only rebuilt an
    instance) is known per pickle."""
    safe_name = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "Global"
    return type(safe_name, (Opaque,), {"__slots__": (), "module": module, "qualname": name, "calls": 0})


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a pickle is unpickled and walked: those build tens of
    thousands of objects that all stay alive, and the collections they trigger found nothing to free but
    cost a fifth of reading an 8,000-tensor checkpoint (measured). What is built is bounded by the pickle's
    length (:func:`~.opcodes.walk_pickle`), so nothing grows unchecked meanwhile.
    Nested or concurrent uses are safe: only the one that found it on turns it back on."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


#: What a damaged or hostile pickle makes the (safe) unpickler raise: each means "cannot be unpickled safely".
UNPICKLE_ERRORS: tuple[type[Exception], ...] = (
    pickle.UnpicklingError,
    EOFError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    KeyError,
    OverflowError,
    RecursionError,
    MemoryError,
)

SUSPICIOUS = "suspicious-global"
PICKLED_CLASS = "pickled-class"


class SafeUnpickler(pickle.Unpickler):
    """Unpickle a checkpoint pickle without executing it.

    ``data`` is the pickle's bytes (bytes, bytearray, memoryview, an mmap: the pickle starts at ``start``
    and ends at its STOP opcode; :attr:`end` is where that is) or a binary file, read whole. Before anything
    is built, :func:`.opcodes.walk_pickle` checks every declared length and memo
    index against the bytes there are (``load`` raises ``pickle.UnpicklingError`` naming the first that
    lies). ``persistent_load`` is injected (the zip and legacy readers map storages to byte ranges);
    ``source`` names the pickle in reports (``data.pkl``). What the pickle names is judged by
    :func:`trainprobe.checkpoint.reading.pickle.globals.classify_global` and reported in ``notes``: suspicious
    globals (also those reached before the pickle broke off) and the known classes it rebuilt.
    :attr:`tensors` lists every tensor the pickle built, reachable from its object or not."""

    def __init__(
        self,
        data: Any,
        *,
        source: str,
        persistent_load: Callable[[Any], Any] | None = None,
        start: int = 0,
    ) -> None:
        if hasattr(data, "read") and not hasattr(data, "find"):  # a file (an mmap has both)
            data, start = data.read(), 0
        elif isinstance(data, memoryview):
            data = data.tobytes()
        self._shape_error: PickleShapeError | None = None
        try:
            self.end = walk_pickle(data, start)
        except PickleShapeError as exc:
            # What comes before the bad opcode is sound (and torch.load would run it): unpickled for its
            # globals, then the walk's error is raised.
            self._shape_error, self.end = exc, start + exc.at
        window = (
            data
            if start == 0 and self.end == len(data) and isinstance(data, bytes)
            else data[start : self.end]
        )
        super().__init__(io.BytesIO(window), encoding="latin1")
        self.source = source
        self._found: list[Note] = []
        self._classes: dict[tuple[str, str], tuple[type[Opaque], KnownGlobal | None]] = {}
        self._persistent_load = persistent_load
        self.tensors: list[TensorRef] = []

    def load(self) -> Any:
        with collector_paused():
            if self._shape_error is not None:
                with contextlib.suppress(*UNPICKLE_ERRORS):
                    super().load()
                raise self._shape_error
            return super().load()

    @property
    def notes(self) -> list[Note]:
        """What this pickle names that is not plain data, in the order first met: suspicious globals, the
        known classes it rebuilt, and known classes it called (their constructor would run)."""
        out = list(self._found)
        for (module, name), (cls, known) in self._classes.items():
            qualified = f"{module}.{name}"
            if known is None or known.kind == "data":
                continue
            calls = int(getattr(cls, "calls", 0))
            if known.kind == "class" and calls:
                out.append(
                    Note(
                        SUSPICIOUS,
                        f"suspicious global {qualified} in {self.source}: called with arguments, so "
                        "torch.load would run its constructor",
                        qualified,
                    )
                )
            else:
                loader = "torch.jit.load" if known.kind == "torchscript" else "torch.load(weights_only=False)"
                what = known.what if known.what == qualified else f"{known.what} ({qualified})"
                out.append(
                    Note(
                        PICKLED_CLASS,
                        f"a pickled {what} in {self.source}: loading it needs {loader}",
                        qualified,
                    )
                )
        return out

    def persistent_load(self, pid: Any) -> Any:
        if self._persistent_load is None:
            raise pickle.UnpicklingError(f"unexpected persistent id in {self.source}")
        return self._persistent_load(pid)

    def find_class(self, module: str, name: str) -> Any:
        # Protocol-2 pickles use Python 2 names (__builtin__.eval, commands.Popen); report the Python 3 ones.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        rebuilder = REBUILDERS.get((module, name))
        if rebuilder is not None:
            return self._tracked(rebuilder) if rebuilder in TENSOR_BUILDERS else rebuilder
        if module == "torch":
            if name in STORAGE_CLASSES:
                return StorageType(STORAGE_CLASSES[name])
            info = lookup(name)
            if info is not None:
                return DTypeToken(info.name)
        if module in ("torch.storage", "torch") and name in (
            "UntypedStorage",
            "TypedStorage",
            "_LegacyStorage",
        ):
            return StorageType("uint8")
        key = (module, name)
        if key not in self._classes:
            known = classify_global(module, name)
            self._classes[key] = (placeholder_class(module, name), known)
            if known is None:
                qualified = f"{module}.{name}"
                self._found.append(
                    Note(SUSPICIOUS, f"suspicious global {qualified} in {self.source}", qualified)
                )
        return self._classes[key][0]

    def _tracked(self, rebuild: Callable[..., Any]) -> Callable[..., Any]:
        """``rebuild`` for this pickle alone: it lists the tensors it builds (a BUILD opcode that sets
        attributes on the function changes this copy, never the module's)."""
        built = self.tensors

        def tracked(*args: Any) -> Any:
            value = rebuild(*args)
            if isinstance(value, TensorRef):
                built.append(value)
            return value

        return tracked


def safe_loads(
    data: bytes, *, source: str, persistent_load: Callable[[Any], Any] | None = None
) -> tuple[Any, list[Note]]:
    """Unpickle ``data`` safely; returns the object (placeholders inside) and the notes on what it names."""
    unpickler = SafeUnpickler(data, source=source, persistent_load=persistent_load)
    obj = unpickler.load()
    return obj, unpickler.notes


_NOT_PARSED = object()


def first_pickle(head: bytes) -> Any:
    """The object the first pickle in ``head`` builds (placeholders inside), or a sentinel that equals
    nothing when ``head`` does not start with a complete pickle. For sniffing formats: never raises."""
    try:
        return SafeUnpickler(head, source="header", persistent_load=lambda _pid: None).load()
    except Exception:  # any failure to parse a file's first bytes just means "not this format"
        return _NOT_PARSED


def starts_like_a_pickle(head: bytes) -> bool:
    """Whether ``head`` opens with something ``torch.load`` would unpickle: a PROTO opcode (protocols 2-5), a
    complete protocol-0/1 pickle, or protocol-0/1 opcodes that go wrong the way only a hostile pickle does
    (a memo index or length it cannot hold, after sound opcodes) or that name a global before they break
    off. Text that merely starts with an opcode letter breaks off at once, naming nothing."""
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return True
    try:
        walk_pickle(head)
    except PickleShapeError as exc:
        if exc.at == 0:
            return False
        if exc.impossible:
            return True
        prefix = SafeUnpickler(head[: exc.at], source="header", persistent_load=lambda _pid: None)
        with contextlib.suppress(Exception):  # only what it named before breaking off matters
            prefix.load()
        return bool(prefix._classes)
    return True
