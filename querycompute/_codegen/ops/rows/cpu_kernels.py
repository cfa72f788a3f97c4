"""numba kernels of X.sum / min / max (axis=0) on the cpu: rows_columns.py explains the
algorithm and calls them.

This file is never imported by querycompute: rows_columns.py puts `SUM_BLOCK = ...` before
its text and loads the whole through the cpu backend's one numba loader (numba_loader.py),
so numba's compiled code is cached beside it in the kernel cache like every other cpu kernel.

Each reduction is one entry point over a range of tiles [t0, t1) -- tile t is row chunk
t // blocks and column block t % blocks -- run without the GIL by the morsel scheduler
(backends/cpu/morsels.py), writing each tile's partials into arrays the caller owns; then a
combine that folds the chunks' partials in chunk order on the calling thread:
col_sum_tiles(t0, t1, X, part, rows, width) + col_sum_combine(part), and
col_minmax_tiles(t0, t1, X, lo_p, hi_p, nan_p, rows, width, want_max) + col_minmax_combine.
"""
import numpy as np
from numba import njit

_OPTS = dict(error_model="numpy", fastmath=False, cache=True, nogil=True)


@njit(**_OPTS)
def col_sum_tiles(t0, t1, X, part, rows, width):
    """Tiles [t0, t1) of X's column sums: tile (c, block) writes part[c, block's columns],
    accumulated in part's dtype (m >= 1)."""
    m, k = X.shape
    blocks = (k + width - 1) // width
    zero = np.zeros(1, part.dtype)[0]
    for t in range(t0, t1):
        c = t // blocks
        lo = (t % blocks) * width
        hi = min(k, lo + width)
        p = part[c, lo:hi]
        b = np.empty(hi - lo, part.dtype)
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
    return 0


@njit(**_OPTS)
def col_sum_combine(part):
    """The column sums (k,): the chunks' partials added in chunk order."""
    res = part[0].copy()
    for c in range(1, part.shape[0]):   # chunk order: fixed, whatever ran where
        for j in range(part.shape[1]):
            res[j] += part[c, j]
    return res


@njit(**_OPTS)
def col_minmax_tiles(t0, t1, X, lo_p, hi_p, nan_p, rows, width, want_max):
    """Tiles [t0, t1) of X's column min / max / any NaN into lo_p, hi_p, nan_p (chunks, k)
    (m >= 1); want_max: 0 min, 1 max, 2 both (the one not wanted holds the first row)."""
    m, k = X.shape
    blocks = (k + width - 1) // width
    for t in range(t0, t1):
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
    return 0


@njit(**_OPTS)
def col_minmax_combine(lo_p, hi_p, nan_p):
    """(min, max, any NaN) vectors (k,): the chunks' partials folded in chunk order."""
    mn_r = lo_p[0].copy()
    mx_r = hi_p[0].copy()
    nan_r = nan_p[0].copy()
    for c in range(1, lo_p.shape[0]):
        for j in range(lo_p.shape[1]):
            mn_r[j] = lo_p[c, j] if lo_p[c, j] < mn_r[j] else mn_r[j]
            mx_r[j] = hi_p[c, j] if hi_p[c, j] > mx_r[j] else mx_r[j]
            nan_r[j] |= nan_p[c, j]
    return mn_r, mx_r, nan_r
