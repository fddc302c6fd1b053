"""An unpickler that never imports and never calls anything named by the file.

``find_class`` is the only door from a pickle to code. Here it answers from a fixed table: torch's tensor and
storage rebuild functions become our own functions that build :class:`TensorRef` descriptions, a few stdlib
containers are themselves, known data classes become inert :class:`Opaque` placeholders, and every other
global also becomes a placeholder *and* is reported (``suspicious global posix.system in data.pkl``). Nothing
is imported; nothing from the file runs."""

from __future__ import annotations

import _compat_pickle
import collections
import io
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainprobe.checkpoint.base import Note, Opaque
from trainprobe.checkpoint.dtypes import STORAGE_CLASSES, lookup


@dataclass(frozen=True)
class StorageType:
    """``torch.FloatStorage`` and friends as they appear in persistent ids: just the element dtype."""

    dtype: str


@dataclass(frozen=True)
class DTypeToken:
    """A pickled ``torch.float32``."""

    name: str


@dataclass(eq=False)
class TensorRef:
    """A tensor as the pickle describes it: its storage (whatever ``persistent_load`` returned) and its
    view."""

    storage: Any
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    is_parameter: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _ints(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


def _storage_dtype(storage: Any) -> str:
    return str(getattr(storage, "dtype", "uint8"))


def _rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any, *_rest: Any) -> TensorRef:
    return TensorRef(storage, _storage_dtype(storage), _ints(size), _ints(stride), int(storage_offset))


def _rebuild_tensor_v3(
    storage: Any,
    storage_offset: Any,
    size: Any,
    stride: Any,
    _grad: Any,
    _hooks: Any,
    dtype: Any,
    *_rest: Any,
) -> TensorRef:
    name = dtype.name if isinstance(dtype, DTypeToken) else _storage_dtype(storage)
    return TensorRef(storage, name, _ints(size), _ints(stride), int(storage_offset))


def _rebuild_parameter(data: Any, *_rest: Any) -> Any:
    if isinstance(data, TensorRef):
        data.is_parameter = True
    return data


def _rebuild_from_type_v2(func: Any, _new_type: Any, args: Any, _state: Any) -> Any:
    # ``func`` came out of find_class, so it is one of our rebuild functions or an Opaque class: safe to call.
    return func(*args)


def _codecs_encode(text: Any, encoding: str = "utf-8", *_rest: Any) -> bytes:
    # Protocol-2 pickles spell bytes as _codecs.encode(str, "latin1").
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8"):
        return b""
    return text.encode(encoding)


def _bytearray(data: Any = b"", *_rest: Any) -> bytearray:
    # bytearray(n) would allocate n bytes on the file's say-so; only copies of given bytes are allowed.
    return bytearray(data) if isinstance(data, (bytes, bytearray)) else bytearray()


def _size(values: Any = ()) -> tuple[int, ...]:
    return _ints(values)


def _device(*args: Any) -> str:
    return ":".join(str(a) for a in args)


_REBUILDERS: dict[tuple[str, str], Callable[..., Any]] = {
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "slice"): slice,
    ("builtins", "complex"): complex,
    ("builtins", "bytearray"): _bytearray,
    ("_codecs", "encode"): _codecs_encode,
    ("torch", "Size"): _size,
    ("torch", "device"): _device,
}

# Classes known to be plain data in checkpoints: kept as placeholders without a report.
_KNOWN_DATA_MODULES = (
    "torch.distributed.checkpoint.",
    "torch.distributed._shard.",
    "torch.distributed.tensor.",
    "pathlib",
    "numpy",
    "lightning.fabric.utilities.data",
    "pytorch_lightning.utilities.parsing",
    "lightning_fabric.utilities.data",
    "omegaconf",
    "deepspeed.runtime.zero.config",
    "deepspeed.runtime.fp16.loss_scaler",
    "deepspeed.utils.tensor_fragment",
    "deepspeed.checkpoint.constants",
    "transformers.training_args",
)
_KNOWN_DATA_GLOBALS = {
    ("argparse", "Namespace"),
    ("collections", "defaultdict"),
    ("collections", "Counter"),
    ("collections", "deque"),
    ("builtins", "object"),
    ("builtins", "range"),
    ("datetime", "datetime"),
    ("datetime", "date"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
    ("decimal", "Decimal"),
    ("fractions", "Fraction"),
    ("enum", "Enum"),
    ("uuid", "UUID"),
    ("torch", "Tensor"),
    ("torch.nn.parameter", "Parameter"),
    ("torch.nn.parameter", "Buffer"),
    ("torch.serialization", "_get_layout"),
    ("torch", "strided"),
    ("torch", "sparse_coo"),
    ("torch", "contiguous_format"),
    ("torch", "channels_last"),
    ("torch", "preserve_format"),
    ("torch.optim.lr_scheduler", "LambdaLR"),
}


def _is_known_data(module: str, name: str) -> bool:
    if (module, name) in _KNOWN_DATA_GLOBALS:
        return True
    return any(module == p.rstrip(".") or module.startswith(p.rstrip(".") + ".") for p in _KNOWN_DATA_MODULES)


_placeholder_cache: dict[tuple[str, str], type[Opaque]] = {}


def placeholder_class(module: str, name: str) -> type[Opaque]:
    """An Opaque subclass standing for ``module.name``; calling or building it records arguments, nothing
    else."""
    key = (module, name)
    cls = _placeholder_cache.get(key)
    if cls is None:
        safe_name = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "Global"
        cls = type(safe_name, (Opaque,), {"__slots__": (), "module": module, "qualname": name})
        _placeholder_cache[key] = cls
    return cls


#: What a damaged or hostile pickle makes the (safe) unpickler raise: each means "cannot be unpickled safely".
UNPICKLE_ERRORS: tuple[type[Exception], ...] = (
    pickle.UnpicklingError,
    EOFError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    KeyError,
)


class SafeUnpickler(pickle.Unpickler):
    """Unpickle a checkpoint pickle without executing it.

    ``persistent_load`` is injected (the zip and legacy readers map storages to byte ranges); ``source``
    names the pickle in reports (``data.pkl``). Suspicious globals are collected in ``notes``."""

    def __init__(
        self,
        data: bytes | io.BufferedIOBase | Any,
        *,
        source: str,
        persistent_load: Callable[[Any], Any] | None = None,
    ) -> None:
        stream = io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
        super().__init__(stream, encoding="latin1")
        self.source = source
        self.notes: list[Note] = []
        self._reported: set[str] = set()
        self._persistent_load = persistent_load

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
        rebuilder = _REBUILDERS.get((module, name))
        if rebuilder is not None:
            return rebuilder
        if module == "torch":
            if name in STORAGE_CLASSES:
                return StorageType(STORAGE_CLASSES[name])
            if lookup(name) is not None:
                info = lookup(name)
                assert info is not None
                return DTypeToken(info.name)
        if module in ("torch.storage", "torch") and name in (
            "UntypedStorage",
            "TypedStorage",
            "_LegacyStorage",
        ):
            return StorageType("uint8")
        if not _is_known_data(module, name):
            qualified = f"{module}.{name}"
            if qualified not in self._reported:
                self._reported.add(qualified)
                self.notes.append(
                    Note("suspicious-global", f"suspicious global {qualified} in {self.source}")
                )
        return placeholder_class(module, name)


def safe_loads(
    data: bytes, *, source: str, persistent_load: Callable[[Any], Any] | None = None
) -> tuple[Any, list[Note]]:
    """Unpickle ``data`` safely; returns the object (placeholders inside) and the notes on suspicious
    globals."""
    unpickler = SafeUnpickler(data, source=source, persistent_load=persistent_load)
    obj = unpickler.load()
    return obj, unpickler.notes
