"""The namespace a numba-dialect module is executed in (numba is imported here, lazily).

Besides numpy, math and numba's decorators it holds two intrinsics that reinterpret a
float's bits as a same-width integer and back (numba has no scalar `.view`). Float min/max
reductions use them: the integer min/max key of the float's bits (order_keys.minmax_key_text)
orders like the float (-0.0 just below +0.0), and integer min/max reductions vectorise
without any fast-math flag, while float compare-selects need `nnan` on the whole function.

`libm_fmod` calls the C library's fmodf / fmod as an opaque function. numba's np.fmod is
LLVM's `frem` instruction, which LLVM treats as free of side effects: in a vectorised loop it
evaluates a rarely taken `frem` for every lane (a libm call per element). An opaque call
stays on its branch, so the float32 fmod fast path (numba_py_helpers._FMOD) keeps its speed.

`trailing_zeros` is numba's own count-trailing-zeros intrinsic: the compaction's sparse
writer walks the set bits of its keep words with it.
"""
from __future__ import annotations

import math

import numpy as np

# The two lines a module text starts with when it is imported as a file (the cpu backend's
# disk-cache entries, numba's cache=True): they pull namespace() into the module's globals,
# so the file runs as it is. Every such text starts with this PRELUDE.
PRELUDE = ("from querycompute._codegen.dialects.numba_py_runtime import namespace as _qc_namespace\n"
           "globals().update(_qc_namespace())\n")

NAMESPACE_NAMES = ("np", "math", "njit", "float_bits", "bits_float", "libm_fmod",
                   "trailing_zeros")
_cached: dict | None = None


def namespace() -> dict:
    """A fresh dict of the names generated modules use (the intrinsics are built once)."""
    global _cached
    if _cached is None:
        _cached = _build()
    return dict(_cached)


def _build() -> dict:
    import numba
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
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

    libm_names = {types.float32: "fmodf", types.float64: "fmod"}

    @intrinsic
    def libm_fmod(typingctx, a, b):
        """fmod(a, b) of two float32 or two float64 by a call into the C library."""
        if a != b or a not in libm_names:
            return None

        def codegen(context, builder, sig, args):
            ftype = context.get_value_type(sig.return_type)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ftype, [ftype, ftype]),
                                                libm_names[sig.return_type])
            return builder.call(fn, args)
        return a(a, b), codegen

    from numba.cpython.unsafe.numbers import trailing_zeros    # numba's cttz intrinsic
    return {"np": np, "math": math, "njit": numba.njit,
            "float_bits": float_bits, "bits_float": bits_float, "libm_fmod": libm_fmod,
            "trailing_zeros": trailing_zeros}
