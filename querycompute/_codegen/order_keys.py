"""Sort keys as order-preserving unsigned bits: the one definition every backend's sort,
top-k and distinct follow (numpy reference below; numba and the GPU dialects spell the same
steps).

For a key column of dtype d, `bits_dtype(d)` is the unsigned type of d's width (bool and
int8/uint8: uint8; float16/int16/uint16: uint16; ...). `transform(x, descending)` maps every
value to bits such that comparing the bits as unsigned integers orders the values the way
DESIGN.md section 3 wants:

    1. NaN (floats)          -> all ones (the largest bits), in BOTH directions: NaN last
    2. -0.0 (floats)         -> the bits of +0.0 first (so -0.0 == 0.0; stability decides)
    3. floats                -> negative: ~bits; positive: bits | sign bit
       signed ints           -> bits ^ sign bit
       unsigned ints, bool   -> bits
    4. descending, not NaN   -> ~(the bits of step 3)  (never all ones: that would be a NaN)

Equal keys give equal bits and unequal keys unequal bits (all NaNs are one value), so
`distinct` tests equality on these bits too. A sort is stable: among equal bits the element
that came first stays first (LINQ's OrderBy and OrderByDescending are both stable).
A multi-key sort (then_by, tuple keys) orders by the first key's bits, then the next's...:
an LSD radix sort runs the passes of the LAST key first.
"""
from __future__ import annotations

import numpy as np

from . import dtypes

_BITS = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


def bits_dtype(dtype: str) -> str:
    """The unsigned type whose values order keys of `dtype`."""
    if dtype == "bool":
        return "uint8"
    return _BITS[dtypes.itemsize(dtype)]


def transform(x: np.ndarray, descending: bool = False) -> np.ndarray:
    """The order bits of a key column (numpy reference of the steps above)."""
    x = np.asarray(x)
    dt = np.dtype(bits_dtype(str(x.dtype)))
    width = dt.itemsize * 8
    sign = dt.type(1 << (width - 1))
    ones = dt.type((1 << width) - 1)
    if x.dtype == np.bool_:
        t = x.view(np.uint8).copy()
    elif x.dtype.kind == "u":
        t = x.astype(dt, copy=True)
    elif x.dtype.kind == "i":
        t = x.view(dt) ^ sign
    else:
        nan = np.isnan(x)
        bits = (x + x.dtype.type(0.0)).view(dt)       # -0.0 + 0.0 == +0.0 (round to nearest)
        t = np.where(bits & sign, ~bits, bits | sign).astype(dt, copy=False)
        if descending:
            t = ~t
        t[nan] = ones
        return t
    return ~t if descending else t


def stable_order(keys, descending) -> np.ndarray:
    """The stable sort permutation (int64) of the rows of key columns `keys` (the first key
    primary), each ascending or descending: the reference the backends' sorts must equal."""
    if not keys:
        raise ValueError("stable_order needs at least one key column")
    bits = [transform(k, d) for k, d in zip(keys, descending)]
    return np.lexsort(bits[::-1]).astype(np.int64, copy=False)   # lexsort: last key primary, stable


def first_occurrence(keys) -> np.ndarray:
    """keep[i]: no j < i has equal bits in every key column (distinct's first occurrence)."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=bool)
    bits = [transform(k) for k in keys]
    order = np.lexsort(bits[::-1])
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = np.zeros(n - 1, dtype=bool)
    for b in bits:
        s = b[order]
        new_run[1:] |= s[1:] != s[:-1]
    keep = np.empty(n, dtype=bool)
    keep[order] = new_run       # the first of each run of equal keys is its smallest index
    return keep
