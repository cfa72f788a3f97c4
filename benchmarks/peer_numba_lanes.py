"""Hand-written numba prange loops for W1-W6 without fastmath: the practical CPU limit when
results must stay IEEE-exact per element.

Without fastmath LLVM may not reassociate a float reduction, so one accumulator cannot
vectorise. Each chunk therefore keeps 8 independent scalar accumulators (lane j sums elements
j, j+8, ...), which LLVM's SLP vectoriser packs into SIMD registers legally; chunk partials are
summed pairwise by np.sum. (Lanes held in a small array instead measured 2x slower: the
stores to it are not promoted to registers.) Chunks are short (CHUNK elements) so float32
partials stay accurate. Indexes are cast to uint64 so loads skip numba's negative-index
fix-up, which otherwise blocks vectorisation. W2 is the classic two-pass ordered compaction:
count per chunk, prefix-sum, scatter."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

CHUNK = 4096
F0, F1, F2, F10, F100, F1000 = (np.float32(c) for c in (0, 1, 2, 10, 100, 1000))


def lane_sum(term, zero):
    """A parallel sum of term(arrays, i) over i < len(arrays[0]), with 8 accumulator lanes."""
    @njit(parallel=True, error_model="numpy")
    def run(arrays):
        n = arrays[0].size
        nch = (n + CHUNK - 1) // CHUNK
        part = np.empty(nch, type(zero))
        for c in prange(nch):
            lo, hi = c * CHUNK, min(c * CHUNK + CHUNK, n)
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
            i = lo
            while i + 8 <= hi:
                a0 += term(arrays, i)
                a1 += term(arrays, i + 1)
                a2 += term(arrays, i + 2)
                a3 += term(arrays, i + 3)
                a4 += term(arrays, i + 4)
                a5 += term(arrays, i + 5)
                a6 += term(arrays, i + 6)
                a7 += term(arrays, i + 7)
                i += 8
            s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
            for k in range(i, hi):
                s += term(arrays, k)
            part[c] = s
        return part.sum()
    return run


@njit(inline="always", error_model="numpy")
def _w1_term(arrays, i):
    y = arrays[0][np.uint64(i)] * F2
    return (y + F100) if y > F1000 else F0


@njit(inline="always", error_model="numpy")
def _w4_term(arrays, i):
    k = np.uint64(i)
    return arrays[0][k] * arrays[1][k] + F1


@njit(inline="always", error_model="numpy")
def _w6_term(arrays, i):
    k = np.uint64(i)
    price, qty, cat = arrays
    keep = (cat[k] == 3) & (qty[k] > 2)
    return np.float64(price[k]) * qty[k] if keep else 0.0


_w1 = lane_sum(_w1_term, F0)
_w4 = lane_sum(_w4_term, F0)
_w6 = lane_sum(_w6_term, 0.0)


@njit(parallel=True, error_model="numpy")
def _w2(x):
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    counts = np.zeros(nch + 1, np.int64)
    for c in prange(nch):
        k = 0
        for i in range(c * CHUNK, min(c * CHUNK + CHUNK, n)):
            k += x[np.uint64(i)] % np.float32(3) < F1
        counts[c + 1] = k
    offsets = np.cumsum(counts)
    out = np.empty(offsets[nch], np.float32)
    for c in prange(nch):
        j = offsets[c]
        for i in range(c * CHUNK, min(c * CHUNK + CHUNK, n)):
            v = x[np.uint64(i)]
            if v % np.float32(3) < F1:
                out[j] = v * F2 + F1
                j += 1
    return out


@njit(parallel=True, error_model="numpy")
def _w3(x):
    k = 0
    for i in prange(x.size):
        v = x[np.uint64(i)]
        k += (v > np.float32(500)) & (v < np.float32(1500))
    return k


@njit(inline="always", error_model="numpy")
def _w5_lane(x, i, s, t, m):
    v = x[np.uint64(i)]
    keep = v > F10
    y = np.sqrt(v) + F1
    return s + (y if keep else F0), (y if keep and y > t else t), m + keep


@njit(parallel=True, error_model="numpy")
def _w5(x):
    """Sum, max and count of sqrt(v)+1 over v > 10, in 4 lanes per chunk."""
    n = x.size
    nch = (n + CHUNK - 1) // CHUNK
    sums = np.empty(nch, np.float32)
    peaks = np.empty(nch, np.float32)
    counts = np.empty(nch, np.int64)
    for c in prange(nch):
        lo, hi = c * CHUNK, min(c * CHUNK + CHUNK, n)
        s0 = s1 = s2 = s3 = F0
        t0 = t1 = t2 = t3 = np.float32(-np.inf)
        m0 = m1 = m2 = m3 = 0
        i = lo
        while i + 4 <= hi:
            s0, t0, m0 = _w5_lane(x, i, s0, t0, m0)
            s1, t1, m1 = _w5_lane(x, i + 1, s1, t1, m1)
            s2, t2, m2 = _w5_lane(x, i + 2, s2, t2, m2)
            s3, t3, m3 = _w5_lane(x, i + 3, s3, t3, m3)
            i += 4
        s, t, m = (s0 + s1) + (s2 + s3), max(max(t0, t1), max(t2, t3)), m0 + m1 + m2 + m3
        for k in range(i, hi):
            s, t, m = _w5_lane(x, k, s, t, m)
        sums[c], peaks[c], counts[c] = s, t, m
    return sums.sum() / np.float32(counts.sum()), peaks.max()


SETUPS = {
    "W1": lambda d: lambda: _w1((d["x"],)),
    "W2": lambda d: lambda: _w2(d["x"]),
    "W3": lambda d: lambda: int(_w3(d["x"])),
    "W4": lambda d: lambda: _w4((d["a"], d["b"])),
    "W5": lambda d: lambda: _w5(d["x"]),
    "W6": lambda d: lambda: _w6((d["price"], d["qty"], d["cat"])),
}
