"""numba kernels of X.sum / min / max (axis=0) on the cpu: rows_columns.py explains the
algorithm and calls them.

This file is never imported by querycompute: rows_columns.py puts `SUM_BLOCK = ...` before
its text and loads the whole through the cpu backend's one numba loader (numba_loader.py),
so numba's compiled code is cached beside it in the kernel cache like every other cpu kernel.
Entry points: col_sum_serial / _parallel(X, acc_like, rows, width) and
col_minmax_serial / _parallel(X, rows, width, want_max).
"""
import types

import numpy as np
from numba import njit, prange


def _col_sum(X, acc_like, rows, width):
    """X's column sums (k,), accumulated in acc_like's dtype (m >= 1)."""
    m, k = X.shape
    chunks = (m + rows - 1) // rows
    blocks = (k + width - 1) // width
    part = np.empty((chunks, k), acc_like.dtype)
    zero = np.zeros(1, acc_like.dtype)[0]
    for t in prange(chunks * blocks):
        c = t // blocks
        lo = (t % blocks) * width
        hi = min(k, lo + width)
        p = part[c, lo:hi]
        b = np.empty(hi - lo, acc_like.dtype)
        r1 = min(m, (c + 1) * rows)
        first = X[c * rows, lo:hi]
        for j in range(hi - lo):     # 0 + x: no zeroing pass, and -0.0 sums to +0.0 (np.sum)
            p[j] = zero + first[j]
        for r0 in range(c * rows, r1, SUM_BLOCK):
            if r0 == c * rows:       # the first block straight into the tile's partials
                for i in range(r0 + 1, min(r1, r0 + SUM_BLOCK)):
                    row = X[i, lo:hi]
                    for j in range(hi - lo):
                        p[j] += row[j]
                continue
            b[:] = 0
            for i in range(r0, min(r1, r0 + SUM_BLOCK)):
                row = X[i, lo:hi]
                for j in range(hi - lo):
                    b[j] += row[j]
            for j in range(hi - lo):
                p[j] += b[j]
    if chunks == 1:
        return part[0]
    res = part[0].copy()
    for c in range(1, chunks):       # chunk order: fixed, whatever ran where
        for j in range(k):
            res[j] += part[c, j]
    return res


def _col_minmax(X, rows, width, want_max):
    """(min, max, any NaN) vectors of X's columns (m >= 1); want_max: 0 min, 1 max, 2 both
    (the one not wanted holds the first row)."""
    m, k = X.shape
    chunks = (m + rows - 1) // rows
    blocks = (k + width - 1) // width
    lo_p = np.empty((chunks, k), X.dtype)
    hi_p = np.empty((chunks, k), X.dtype)
    nan_p = np.zeros((chunks, k), np.bool_)
    for t in prange(chunks * blocks):
        c = t // blocks
        lo = (t % blocks) * width
        hi = min(k, lo + width)
        r0 = c * rows
        r1 = min(m, r0 + rows)
        mn = lo_p[c, lo:hi]
        mx = hi_p[c, lo:hi]
        nan = nan_p[c, lo:hi]
        first = X[r0, lo:hi]
        for j in range(hi - lo):
            mn[j] = first[j]
            mx[j] = first[j]
            nan[j] = first[j] != first[j]
        for i in range(r0 + 1, r1):
            row = X[i, lo:hi]
            if want_max != 1:
                for j in range(hi - lo):
                    x = row[j]
                    mn[j] = x if x < mn[j] else mn[j]
                    nan[j] |= x != x
            if want_max != 0:
                for j in range(hi - lo):
                    x = row[j]
                    mx[j] = x if x > mx[j] else mx[j]
                    nan[j] |= x != x
    mn_r = lo_p[0].copy()
    mx_r = hi_p[0].copy()
    nan_r = nan_p[0].copy()
    for c in range(1, chunks):
        for j in range(k):
            mn_r[j] = lo_p[c, j] if lo_p[c, j] < mn_r[j] else mn_r[j]
            mx_r[j] = hi_p[c, j] if hi_p[c, j] > mx_r[j] else mx_r[j]
            nan_r[j] |= nan_p[c, j]
    return mn_r, mx_r, nan_r


def flavours(fn):
    """(serial, parallel) numba dispatchers of one kernel. The serial one is the same code
    compiled without `parallel` (prange runs as range: same tiles, same order, same bits);
    it gets its own qualname so numba's disk cache keeps the two apart."""
    serial = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_serial",
                                fn.__defaults__, fn.__closure__)
    serial.__qualname__ = fn.__qualname__ + "_serial"
    opts = dict(error_model="numpy", fastmath=False, cache=True, nogil=True)
    return njit(**opts)(serial), njit(parallel=True, **opts)(fn)


col_sum_serial, col_sum_parallel = flavours(_col_sum)
col_minmax_serial, col_minmax_parallel = flavours(_col_minmax)
