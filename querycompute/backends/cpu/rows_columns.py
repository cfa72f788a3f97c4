"""X.sum / min / max (axis=0) of a 2-D array on the cpu: the one column-reduction kernel of the
cpu backend, for long rows (rows.py's "column-tiled" plan) and for scalarized small elements
(backends/cpu_columns.py: `qc.query(X).sum()` / `min` / `max` / `mean` / `agg` of them, whose
columns X[:, j] are views of one array).

Algorithm (seed 002's non-inner reduction, without a transpose copy): the (m, k) array is cut
into tiles of (row chunk, column block). A tile walks its rows in order; each row's slice
row[lo:hi] is read once, contiguously, and folded into a vector of partials, one per column
(`p[j] += row[j]`: independent lanes, so LLVM vectorises over j with no reassociation, and
each value is read exactly once -- not k strided column reductions). Tiles run in parallel
(prange); their partials are combined in chunk order. The tile sizes depend only on (m, k)
(ROWS_PER_TILE values per tile, COLUMN_BLOCK columns), never on the thread count, so a
result's bits depend only on the input.

Accuracy: sums accumulate in NumPy's sum dtype (float16 in float32 -- the caller converts --,
float32 / float64 in themselves, ints in int64 / uint64, wrapping as NumPy does). NumPy's own
axis=0 sum adds the rows one by one (m - 1 rounding steps per column); here the rows of a tile
are added in blocks of SUM_BLOCK (the first straight into the partials, starting from 0 + x
so that -0.0 sums to +0.0 as np.sum; each later one into a zeroed block vector then added to
the partials), so the error grows with SUM_BLOCK + m / SUM_BLOCK instead of m: never less
accurate than NumPy (a tile's first SUM_BLOCK rows are added in NumPy's order), and float32
keeps 16 SIMD lanes instead of 8 (a float64 accumulator would also cost a conversion pass
over the k results). min / max compare-and-select per lane, with a NaN flag per column (a
NaN anywhere makes that column NaN, as np.min / np.max); a tie between -0.0 and +0.0 keeps
the first one seen (NumPy does not say which).

The kernels are static numba functions (compiled once per dtype, cached on disk by numba);
`reduce_columns` picks the tiles, calls one, and returns the per-op vectors.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

SUM_BLOCK = 512              # rows summed into a block vector before joining the tile's partials
ROWS_PER_TILE = 1 << 17      # values per tile (row chunk x column block), about 512 KiB of float32
# columns per tile: a block's partials (1 MiB of float32) stay in L2 while its rows stream
# past in long runs; measured on (10, 1e6) float32 (CPU ms, one core): 4096 columns 2.42,
# 2**16 2.14, 2**18 1.56, 2**19 1.48, all 1e6 at once 3.21 (NumPy 1.53-1.72)
COLUMN_BLOCK = 1 << 18
# Below this many values the serial flavour runs: a column reduction is memory-bound and one
# core already reads ~25-40 GB/s on the development machine, so waking the thread pool (tens
# of microseconds idle, milliseconds on loaded cores) pays only for very large arrays
# (docs/performance.md, Shaped elements).
PARALLEL_MIN = 1 << 24


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
    import types
    serial = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_serial",
                                fn.__defaults__, fn.__closure__)
    serial.__qualname__ = fn.__qualname__ + "_serial"
    opts = dict(error_model="numpy", fastmath=False, cache=True, nogil=True)
    return njit(**opts)(serial), njit(parallel=True, **opts)(fn)


COL_SUM = flavours(_col_sum)
COL_MINMAX = flavours(_col_minmax)


def wants_parallel(m: int, k: int) -> int:
    """1 when the work pays for waking numba's thread pool, else 0 (serial flavour)."""
    return int(m * k >= PARALLEL_MIN)


def tiles(m: int, k: int) -> tuple[int, int]:
    """(rows per chunk, columns per block): about ROWS_PER_TILE values per tile, from (m, k)
    only, so the partials -- and the result's bits -- never depend on the thread count."""
    width = min(k, COLUMN_BLOCK) or 1
    rows = max(SUM_BLOCK // 8, ROWS_PER_TILE // width)
    return rows, width


def sum_acc(dtype: str) -> str:
    """The accumulator of X.sum(axis=0): NumPy's sum dtype (float16 in float32, ints in
    int64 / uint64, float32 and float64 in themselves; see the module docstring)."""
    from ...graph.terminals import sum_dtype
    return sum_dtype(dtype)[0]


def reduce_columns(X: np.ndarray, ops, parallel: bool | None = None) -> dict:
    """{op: vector of k} for op in ops ('sum', 'min', 'max') over X's rows (m >= 1).
    Sums come back in the accumulator dtype (sum_acc), min / max in X's dtype, with
    NaN where a column holds one. `parallel`: the flavour (default: by PARALLEL_MIN)."""
    m, k = X.shape
    rows, width = tiles(m, k)
    par = int(wants_parallel(m, k) if parallel is None else parallel)
    out = {}
    if "sum" in ops:
        out["sum"] = COL_SUM[par](X, np.empty(0, sum_acc(X.dtype.name)), rows, width)
    wanted = [op for op in ("min", "max") if op in ops]
    if wanted:
        mn, mx, nan = COL_MINMAX[par](X, rows, width, 2 if len(wanted) == 2 else int(wanted[0] == "max"))
        for op, v in (("min", mn), ("max", mx)):
            if op in wanted:
                if nan.any():
                    v = np.where(nan, np.array(np.nan, v.dtype), v)
                out[op] = v
    return out


def kernel_source() -> str:
    """The kernels' source, for `q.source("cpu")` and explain."""
    import inspect
    return inspect.getsource(_col_sum) + "\n\n" + inspect.getsource(_col_minmax)
