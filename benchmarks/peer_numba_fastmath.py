"""Hand-written numba prange loops for the float reductions W1, W4, W5, W6 with fastmath=True:
the plain loop a user writes when speed matters more than IEEE order. Each chunk sums into one
accumulator that LLVM is allowed to reassociate and vectorise; chunk partials are summed by
np.sum so the float32 result stays accurate. Loads index with uint64 (numba's negative-index
fix-up otherwise blocks vectorisation: 3x slower on W1) and filters are written as selects. W2 and W3 have no float reduction, so fastmath
has nothing to relax there and they are not repeated here (see peer_numba_lanes)."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

CHUNK = 4096
F0, F1, F2, F10, F100, F1000 = (np.float32(c) for c in (0, 1, 2, 10, 100, 1000))


@njit(parallel=True, fastmath=True, error_model="numpy")
def _w1(x):
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    part = np.empty(nch, np.float32)
    for c in prange(nch):
        s = F0
        for i in range(c * CHUNK, min(c * CHUNK + CHUNK, n)):
            y = x[np.uint64(i)] * F2
            s += (y + F100) if y > F1000 else F0
        part[c] = s
    return part.sum()


@njit(parallel=True, fastmath=True, error_model="numpy")
def _w4(a, b):
    n = a.size
    nch = (n + CHUNK - 1) // CHUNK
    part = np.empty(nch, np.float32)
    for c in prange(nch):
        s = F0
        for i in range(c * CHUNK, min(c * CHUNK + CHUNK, n)):
            s += a[np.uint64(i)] * b[np.uint64(i)] + F1
        part[c] = s
    return part.sum()


@njit(parallel=True, fastmath=True, error_model="numpy")
def _w5(x):
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    sums = np.empty(nch, np.float32)
    peaks = np.empty(nch, np.float32)
    counts = np.empty(nch, np.int64)
    for c in prange(nch):
        s, t, m = F0, np.float32(-np.inf), 0
        for i in range(c * CHUNK, min(c * CHUNK + CHUNK, n)):
            v = x[np.uint64(i)]
            if v > F10:
                y = np.sqrt(v) + F1
                s += y
                t = max(t, y)
                m += 1
        sums[c], peaks[c], counts[c] = s, t, m
    return sums.sum() / np.float32(counts.sum()), peaks.max()


@njit(parallel=True, fastmath=True, error_model="numpy")
def _w6(price, qty, cat):
    n = price.size
    nch = (n + CHUNK - 1) // CHUNK
    part = np.empty(nch, np.float64)
    for c in prange(nch):
        s = 0.0
        for i in range(c * CHUNK, min(c * CHUNK + CHUNK, n)):
            k = np.uint64(i)
            s += np.float64(price[k]) * qty[k] if (cat[k] == 3) & (qty[k] > 2) else 0.0
        part[c] = s
    return part.sum()


SETUPS = {
    "W1": lambda d: lambda: _w1(d["x"]),
    "W4": lambda d: lambda: _w4(d["a"], d["b"]),
    "W5": lambda d: lambda: _w5(d["x"]),
    "W6": lambda d: lambda: _w6(d["price"], d["qty"], d["cat"]),
}
