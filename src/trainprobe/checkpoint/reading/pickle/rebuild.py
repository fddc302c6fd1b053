"""What torch's rebuild functions become when a pickle names them: our own functions that build
:class:`TensorRef` descriptions (a storage, its offset, shape and stride) instead of tensors, and the few
stdlib constructors a checkpoint's pickle may call, as themselves or as harmless equivalents. The safe
unpickler answers ``find_class`` from :data:`REBUILDERS` first."""

from __future__ import annotations

import collections
import itertools
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainprobe.checkpoint.reading.base import MAX_NDIM
from trainprobe.checkpoint.reading.pickle.opaque import Opaque


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
    # The order tensors were built in: a set of tensors is walked in this order (its own follows their ids).
    serial: int = field(default_factory=itertools.count().__next__)

    def __setstate__(self, state: Any) -> None:
        # A BUILD opcode on a tensor: kept aside (its tensors are still found), never a change of the view.
        self.extra["state"] = state


def _int(value: Any) -> int:
    # torch writes Python ints; anything else (a string, a float, a placeholder) is not a tensor geometry.
    if not isinstance(value, int):
        raise pickle.UnpicklingError(
            f"a tensor geometry value that is not an integer: {type(value).__name__}"
        )
    return int(value)


def _ints(value: Any) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)):
        raise pickle.UnpicklingError(f"a tensor size or stride that is a {type(value).__name__}, not a tuple")
    if len(value) > MAX_NDIM:
        raise pickle.UnpicklingError(
            f"a tensor of {len(value):,} dimensions (trainprobe reads up to {MAX_NDIM})"
        )
    try:
        # int.__index__ takes ints (and bools, as isinstance does) and nothing else: the check in C.
        return tuple(map(int.__index__, value))
    except TypeError:
        return tuple(_int(v) for v in value)  # raises, naming the first value that is not an integer


def _storage_dtype(storage: Any) -> str:
    return str(getattr(storage, "dtype", "uint8"))


def _rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any, *_rest: Any) -> TensorRef:
    return TensorRef(storage, _storage_dtype(storage), _ints(size), _ints(stride), _int(storage_offset))


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
    return TensorRef(storage, name, _ints(size), _ints(stride), _int(storage_offset))


def _keep_state(value: Any, state: Any) -> Any:
    """What a rebuild function would drop (a subclass's state), kept where the tensor walk looks."""
    if state and isinstance(value, TensorRef):
        value.extra["state"] = state
    elif state and isinstance(value, Opaque):
        value.state = state
    return value


def _rebuild_parameter(data: Any, _requires_grad: Any = None, _hooks: Any = None, state: Any = None) -> Any:
    if isinstance(data, TensorRef):
        data.is_parameter = True
    return _keep_state(data, state)


def _rebuild_from_type_v2(func: Any, _new_type: Any, args: Any, state: Any) -> Any:
    # ``func`` came out of find_class, so it is one of our rebuild functions or an Opaque class: safe to call.
    if not callable(func) or not isinstance(args, (tuple, list)):
        raise pickle.UnpicklingError("_rebuild_from_type_v2 with a function or arguments it cannot take")
    return _keep_state(func(*args), state)


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
    return ":".join(
        a if isinstance(a, str) else str(a) if isinstance(a, int) and abs(a) < 1 << 63 else "?" for a in args
    )


def _rebuild_qtensor(
    storage: Any, storage_offset: Any, size: Any, stride: Any, quantizer: Any, *_rest: Any
) -> TensorRef:
    ref = TensorRef(storage, _storage_dtype(storage), _ints(size), _ints(stride), _int(storage_offset))
    # (qscheme, scale, zero_point) or (qscheme, scales, zero_points, axis): per-channel ones are tensors.
    ref.extra["quantizer"] = quantizer
    return ref


def _reconstructor(cls: Any, base: Any = None, state: Any = None, *_rest: Any) -> Any:
    # copyreg._reconstructor(cls, object, None) is how protocols 0/1 write "an instance of cls": build it
    # as NEWOBJ would (the placeholder's constructor is not "called"). A builtin base's initial value
    # (a list subclass's items) is kept as the placeholder's argument, where the tensor walk looks.
    if isinstance(cls, type) and issubclass(cls, Opaque):
        obj = cls.__new__(cls)
        if state is not None:
            obj.args = (state,)
        return obj
    return None


# What torch's _rebuild_sparse_tensor takes, by layout: the names of its parts (torch's own attribute names).
_SPARSE_PARTS = {
    "torch.sparse_coo": ("indices", "values"),
    "torch.sparse_csr": ("crow_indices", "col_indices", "values"),
    "torch.sparse_bsr": ("crow_indices", "col_indices", "values"),
    "torch.sparse_csc": ("ccol_indices", "row_indices", "values"),
    "torch.sparse_bsc": ("ccol_indices", "row_indices", "values"),
}


def _rebuild_sparse_tensor(layout: Any, data: Any) -> Any:
    """A sparse tensor as its named parts (``coo.values``, ``csr.crow_indices``), each a tensor read as any
    other; a layout or data this does not know is kept as given (its tensors are found all the same)."""
    args: tuple[Any, ...] = tuple(getattr(layout, "args", ()))
    names = _SPARSE_PARTS.get(args[0]) if len(args) == 1 and isinstance(args[0], str) else None
    if names is None or not isinstance(data, (tuple, list)) or len(data) < len(names):
        return (layout, data)
    parts: dict[str, Any] = dict(zip(names, data, strict=False))
    parts["size"] = data[len(names)] if len(data) > len(names) else None
    return parts


# The rebuild functions that make TensorRefs: each unpickler wraps them to list every tensor it built.
TENSOR_BUILDERS = frozenset(
    {_rebuild_tensor, _rebuild_tensor_v3, _rebuild_parameter, _rebuild_qtensor, _rebuild_from_type_v2}
)

REBUILDERS: dict[tuple[str, str], Callable[..., Any]] = {
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch._utils", "_rebuild_qtensor"): _rebuild_qtensor,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("torch._utils", "_rebuild_sparse_tensor"): _rebuild_sparse_tensor,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "slice"): slice,
    ("builtins", "complex"): complex,
    ("builtins", "bytearray"): _bytearray,
    ("_codecs", "encode"): _codecs_encode,
    ("copyreg", "_reconstructor"): _reconstructor,
    ("torch", "Size"): _size,
    ("torch", "device"): _device,
}
