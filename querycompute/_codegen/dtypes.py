"""The element types kernels work on, named as NumPy names them ("float32", "int8", ...).

Every dialect maps these names to its own spelling in its table; this module only holds the
facts that are the same everywhere (size, signedness, kind).
"""
from __future__ import annotations

import numpy as np

BOOL = "bool"
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTEGERS = SIGNED + UNSIGNED
FLOATS = ("float16", "float32", "float64")
ALL = (BOOL,) + INTEGERS + FLOATS


def normalize(dtype) -> str:
    """NumPy dtype (or anything np.dtype accepts) -> canonical name; rejects what kernels can't hold."""
    name = np.dtype(dtype).name
    if name not in ALL:
        raise TypeError(f"dtype {name!r} is not a kernel element type; supported: {', '.join(ALL)}")
    return name


def is_float(d: str) -> bool:
    return d in FLOATS


def is_int(d: str) -> bool:
    return d in INTEGERS


def is_signed(d: str) -> bool:
    return d in SIGNED


def is_unsigned(d: str) -> bool:
    return d in UNSIGNED


def itemsize(d: str) -> int:
    return np.dtype(d).itemsize


def bits(d: str) -> int:
    return 8 * itemsize(d)


def unsigned_of(d: str) -> str:
    """Same-width unsigned type: signed arithmetic is done there so overflow wraps."""
    return {"int8": "uint8", "int16": "uint16", "int32": "uint32", "int64": "uint64"}.get(d, d)


def int_limits(d: str) -> tuple[int, int]:
    info = np.iinfo(d)
    return int(info.min), int(info.max)


def sum_dtype(d: str) -> tuple[str, str]:
    """(accumulator, result) dtypes of np.sum over `d` (int32 sum -> int64, float16 in float32)."""
    if d == "bool" or d in ("int8", "int16", "int32", "int64"):
        return "int64", "int64"
    if d in ("uint8", "uint16", "uint32", "uint64"):
        return "uint64", "uint64"
    if d == "float16":
        return "float32", "float16"
    return d, d


def mean_dtype(d: str) -> tuple[str, str]:
    """(accumulator, result) dtypes of np.mean over `d`."""
    if d in ("float16", "float32"):
        return "float32", d
    return "float64", "float64"
