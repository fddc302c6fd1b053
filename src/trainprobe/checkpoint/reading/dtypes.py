"""Torch dtypes as numpy sees them: the storage view, the element size and how non-finite values are encoded.

numpy has no bfloat16 or float8, so those are viewed as unsigned integers of the same width and classified
by bit masks; every other floating dtype uses numpy's own float/complex types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Kind = Literal["float", "complex", "bits", "int", "bool", "opaque"]


@dataclass(frozen=True)
class DType:
    """One torch dtype: ``name`` as torch spells it, the numpy dtype its bytes are viewed as, and its kind.

    ``kind`` is ``float``/``complex`` for numpy-native floating types, ``bits`` for bfloat16 and the float8
    family (viewed as unsigned integers, decoded by masks), ``int``/``bool`` for types that cannot be
    non-finite and ``opaque`` for packed or quantized types that are listed but never inspected."""

    name: str
    numpy: str
    kind: Kind

    @property
    def itemsize(self) -> int:
        return int(np.dtype(self.numpy).itemsize)

    @property
    def is_floating(self) -> bool:
        return self.kind in ("float", "complex", "bits")


_TABLE: tuple[DType, ...] = (
    DType("float64", "<f8", "float"),
    DType("float32", "<f4", "float"),
    DType("float16", "<f2", "float"),
    DType("bfloat16", "<u2", "bits"),
    DType("float8_e4m3fn", "u1", "bits"),
    DType("float8_e5m2", "u1", "bits"),
    DType("float8_e4m3fnuz", "u1", "bits"),
    DType("float8_e5m2fnuz", "u1", "bits"),
    DType("float8_e8m0fnu", "u1", "bits"),
    DType("complex128", "<c16", "complex"),
    DType("complex64", "<c8", "complex"),
    # complex32 (chalf) is two float16 values; numpy has no complex32, so it is viewed as float16 pairs.
    DType("complex32", "<f2", "complex"),
    DType("int64", "<i8", "int"),
    DType("int32", "<i4", "int"),
    DType("int16", "<i2", "int"),
    DType("int8", "i1", "int"),
    DType("uint64", "<u8", "int"),
    DType("uint32", "<u4", "int"),
    DType("uint16", "<u2", "int"),
    DType("uint8", "u1", "int"),
    DType("bool", "u1", "bool"),
    DType("qint8", "i1", "opaque"),
    DType("quint8", "u1", "opaque"),
    DType("qint32", "<i4", "opaque"),
    DType("quint4x2", "u1", "opaque"),
    DType("quint2x4", "u1", "opaque"),
    DType("float4_e2m1fn_x2", "u1", "opaque"),
)

DTYPES: dict[str, DType] = {d.name: d for d in _TABLE}

# torch's aliases (torch.float is float32, ...), as they can appear in pickles.
_ALIASES = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "cfloat": "complex64",
    "cdouble": "complex128",
    "chalf": "complex32",
    "long": "int64",
    "int": "int32",
    "short": "int16",
}

# Typed storage classes in torch pickles (``torch.FloatStorage``) and the dtype of their elements.
STORAGE_CLASSES: dict[str, str] = {
    "DoubleStorage": "float64",
    "FloatStorage": "float32",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "ComplexDoubleStorage": "complex128",
    "ComplexFloatStorage": "complex64",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "QInt8Storage": "qint8",
    "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32",
    "QUInt4x2Storage": "quint4x2",
    "QUInt2x4Storage": "quint2x4",
    # An untyped storage holds bytes; the tensor built on it names its own dtype.
    "UntypedStorage": "uint8",
}

# safetensors' dtype names.
SAFETENSORS_DTYPES: dict[str, str] = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
    "C64": "complex64",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U64": "uint64",
    "U32": "uint32",
    "U16": "uint16",
    "U8": "uint8",
    "BOOL": "bool",
}


def lookup(name: str) -> DType | None:
    """The dtype called ``name`` (torch spelling, aliases accepted), or None when trainprobe does not know
    it."""
    return DTYPES.get(_ALIASES.get(name, name))


def element_count_factor(dtype: DType) -> int:
    """How many numpy elements make one torch element (2 for complex32, viewed as float16 pairs)."""
    return 2 if dtype.name == "complex32" else 1
