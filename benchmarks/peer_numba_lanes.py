"""Hand-written numba prange loops for W1-W6 without fastmath: the practical CPU limit when
results must stay IEEE-exact per element.

Without fastmath LLVM may not reassociate a float reduction, so a single accumulator cannot
vectorise. Each chunk therefore keeps LANES independent accumulators (lane j sums elements
j, j+LANES, ...), which LLVM maps onto SIMD registers legally; chunk partials are summed
pairwise by np.sum. Chunks are short (CHUNK elements) so float32 partials stay accurate.
W2 is the classic two-pass ordered compaction: count per chunk, prefix-sum, scatter."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

CHUNK = 4096
LANES = 16
F0, F1, F2, F10, F100, F1000 = (np.float32(c) for c in (0, 1, 2, 10, 100, 1000))


@njit(parallel=True)
def _w1(x):
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    part = np.empty(nch, np.float32)
    for c in prange(nch):
        lo, hi = c * CHUNK, min(c * CHUNK + CHUNK, n)
        acc = np.zeros(LANES, np.float32)
        i = lo
        while i + LANES <= hi:
            for j in range(LANES):
                y = x[i + j] * F2
                acc[j] += (y + F100) if y > F1000 else F0
            i += LANES
        s = acc.sum()
        for k in range(i, hi):
            y = x[k] * F2
            s += (y + F100) if y > F1000 else F0
        part[c] = s
    return part.sum()


@njit(parallel=True)
def _w2(x):
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    counts = np.zeros(nch + 1, np.int64)
    for c in prange(nch):
        k = 0
        for i in range(c * CHUNK, min(c * CHUNK + CHUNK, n)):
            k += x[i] % np.float32(3) < F1
        counts[c + 1] = k
    offsets = np.cumsum(counts)
    out = np.empty(offsets[nch], np.float32)
    for c in prange(nch):
        j = offsets[c]
        for i in range(c * CHUNK, min(c * CHUNK + CHUNK, n)):
            v = x[i]
            if v % np.float32(3) < F1:
                out[j] = v * F2 + F1
                j += 1
    return out


@njit(parallel=True)
def _w3(x):
    k = 0
    for i in prange(x.size):
        v = x[i]
        k += (v > np.float32(500)) & (v < np.float32(1500))
    return k


@njit(parallel=True)
def _w4(a, b):
    n = a.size
    nch = (n + CHUNK - 1) // CHUNK
    part = np.empty(nch, np.float32)
    for c in prange(nch):
        lo, hi = c * CHUNK, min(c * CHUNK + CHUNK, n)
        acc = np.zeros(LANES, np.float32)
        i = lo
        while i + LANES <= hi:
            for j in range(LANES):
                acc[j] += a[i + j] * b[i + j] + F1
            i += LANES
        s = acc.sum()
        for k in range(i, hi):
            s += a[k] * b[k] + F1
        part[c] = s
    return part.sum()


@njit(parallel=True)
def _w5(x):
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    sums = np.empty(nch, np.float32)
    peaks = np.empty(nch, np.float32)
    counts = np.empty(nch, np.int64)
    for c in prange(nch):
        lo, hi = c * CHUNK, min(c * CHUNK + CHUNK, n)
        acc = np.zeros(LANES, np.float32)
        top = np.full(LANES, -np.inf, np.float32)
        cnt = np.zeros(LANES, np.int64)
        i = lo
        while i + LANES <= hi:
            for j in range(LANES):
                v = x[i + j]
                keep = v > F10
                y = np.sqrt(v) + F1
                acc[j] += y if keep else F0
                top[j] = y if keep and y > top[j] else top[j]
                cnt[j] += keep
            i += LANES
        s, t, m = acc.sum(), top.max(), cnt.sum()
        for k in range(i, hi):
            v = x[k]
            if v > F10:
                y = np.sqrt(v) + F1
                s += y
                t = max(t, y)
                m += 1
        sums[c], peaks[c], counts[c] = s, t, m
    return sums.sum() / np.float32(counts.sum()), peaks.max()


@njit(parallel=True)
def _w6(price, qty, cat):
    n = price.size
    nch = (n + CHUNK - 1) // CHUNK
    part = np.empty(nch, np.float64)
    for c in prange(nch):
        lo, hi = c * CHUNK, min(c * CHUNK + CHUNK, n)
        acc = np.zeros(LANES, np.float64)
        i = lo
        while i + LANES <= hi:
            for j in range(LANES):
                keep = (cat[i + j] == 3) & (qty[i + j] > 2)
                acc[j] += np.float64(price[i + j]) * qty[i + j] if keep else 0.0
            i += LANES
        s = acc.sum()
        for k in range(i, hi):
            if cat[k] == 3 and qty[k] > 2:
                s += np.float64(price[k]) * qty[k]
        part[c] = s
    return part.sum()


SETUPS = {
    "W1": lambda d: lambda: _w1(d["x"]),
    "W2": lambda d: lambda: _w2(d["x"]),
    "W3": lambda d: lambda: int(_w3(d["x"])),
    "W4": lambda d: lambda: _w4(d["a"], d["b"]),
    "W5": lambda d: lambda: _w5(d["x"]),
    "W6": lambda d: lambda: _w6(d["price"], d["qty"], d["cat"]),
}
