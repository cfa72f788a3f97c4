"""The namespace a numba-dialect module is executed in (numba is imported here, lazily).

Besides numpy, math and numba's decorators it holds two intrinsics that reinterpret a
float's bits as a same-width integer and back (numba has no scalar `.view`). Float min/max
reductions use them: the integer key `b ^ ((b >> (w-1)) & MAX)` orders like the float
(-0.0 just below +0.0), and integer min/max reductions vectorise without any fast-math
flag, while float compare-selects need `nnan` on the whole function.
"""
from __future__ import annotations

import math

import numpy as np

NAMESPACE_NAMES = ("np", "math", "njit", "prange", "float_bits", "bits_float")
_cached: dict | None = None


def namespace() -> dict:
    """A fresh dict of the names generated modules use (the intrinsics are built once)."""
    global _cached
    if _cached is None:
        _cached = _build()
    return dict(_cached)


def _build() -> dict:
    import numba
    from numba import types
    from numba.extending import intrinsic

    widths = {types.float32: types.int32, types.float64: types.int64}

    @intrinsic
    def float_bits(typingctx, x):
        """float32 -> int32 / float64 -> int64 with the same bits."""
        if x not in widths:
            return None
        rt = widths[x]

        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], context.get_value_type(rt))
        return rt(x), codegen

    @intrinsic
    def bits_float(typingctx, k):
        """int32 -> float32 / int64 -> float64 with the same bits."""
        back = {v: f for f, v in widths.items()}
        if k not in back:
            return None
        rt = back[k]

        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], context.get_value_type(rt))
        return rt(k), codegen

    return {"np": np, "math": math, "njit": numba.njit, "prange": numba.prange,
            "float_bits": float_bits, "bits_float": bits_float}


def order_key(value: float, dtype: str) -> int:
    """The integer key (see module doc) of a float32/float64 value, for printing constants."""
    ftype, itype = (np.float64, np.int64) if dtype == "float64" else (np.float32, np.int32)
    b = int(np.array(value, ftype).view(itype))
    width = 64 if dtype == "float64" else 32
    return b ^ ((b >> (width - 1)) & ((1 << (width - 1)) - 1))
