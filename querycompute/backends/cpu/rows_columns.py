"""X.sum / min / max (axis=0) of a 2-D array on the cpu: the one column-reduction kernel of the
cpu backend, for long rows (rows.py's "column-tiled" plan) and for scalarized small elements
(backends/cpu_columns.py: `qc.query(X).sum()` / `min` / `max` / `mean` / `agg` of them, whose
columns X[:, j] are views of one array).

Algorithm (seed 002's non-inner reduction, without a transpose copy): the (m, k) array is cut
into tiles of (row chunk, column block). A tile walks its rows in order; each row's slice
row[lo:hi] is read once, contiguously, and folded into a vector of partials, one per column
(`p[j] += row[j]`: independent lanes, so LLVM vectorises over j with no reassociation, and
each value is read exactly once -- not k strided column reductions). The kernel is one entry
point over a range of tiles, run without the GIL by the cpu backend's morsel scheduler
(morsels.py: one call on this thread when the tiles make one morsel, else morsels of tiles
handed to the cores dynamically); each tile writes its own row chunk's partials, and a
combine adds the chunks' partials in chunk order afterwards. The tile sizes depend only on
(m, k) (ROWS_PER_TILE values per tile, COLUMN_BLOCK columns), never on the thread count or
the morsels, so a result's bits depend only on the input.

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

The kernels are the fixed text ops/rows/cpu_kernels.py (compiled once per dtype), loaded
through the cpu backend's one numba loader and its disk cache (numba_loader.py);
`reduce_columns` picks the tiles, runs them by morsels and combines them, and returns the
per-op vectors and where their code came from.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from querycompute._codegen.dtypes import sum_dtype

from . import cpu as _cpu
from .numba_loader import kernel_files, load

SUM_BLOCK = 512              # rows summed into a block vector before joining the tile's partials
ROWS_PER_TILE = 1 << 17      # values per tile (row chunk x column block), about 512 KiB of float32
# columns per tile: a block's partials (1 MiB of float32) stay in L2 while its rows stream
# past in long runs; measured on (10, 1e6) float32 (CPU ms, one core): 4096 columns 2.42,
# 2**16 2.14, 2**18 1.56, 2**19 1.48, all 1e6 at once 3.21 (NumPy 1.53-1.72)
COLUMN_BLOCK = 1 << 18


def tiles(m: int, k: int) -> tuple[int, int]:
    """(rows per chunk, columns per block): about ROWS_PER_TILE values per tile, from (m, k)
    only, so the partials -- and the result's bits -- never depend on the thread count."""
    width = min(k, COLUMN_BLOCK) or 1
    rows = max(SUM_BLOCK // 8, ROWS_PER_TILE // width)
    return rows, width


def sum_acc(dtype: str) -> str:
    """The accumulator of X.sum(axis=0): NumPy's sum dtype (float16 in float32, ints in
    int64 / uint64, float32 and float64 in themselves; see the module docstring)."""
    return sum_dtype(dtype)[0]


def kernel_source() -> str:
    """The kernels' module text, as loaded, run and shown by `q.source("cpu")` and explain."""
    return f"SUM_BLOCK = {SUM_BLOCK}\n\n" + kernel_files("rows/cpu_kernels.py")


@lru_cache(maxsize=1)
def _kernels():
    return load("qc_columns", kernel_source())


def grid(m: int, k: int) -> tuple[int, int, int, int]:
    """(rows per chunk, columns per block, row chunks, tiles) of an (m, k) array (m >= 1)."""
    rows, width = tiles(m, k)
    chunks = -(-m // rows)
    return rows, width, chunks, chunks * -(-k // width)


def reduce_columns(X: np.ndarray, ops) -> tuple[dict, str, float]:
    """({op: vector of k} for op in ops ('sum', 'min', 'max') over X's rows (m >= 1), cache
    origin, compile ms). Sums come back in the accumulator dtype (sum_acc), min / max in X's
    dtype, with NaN where a column holds one. The tiles run by morsels (module doc). The
    origin is "compiled" or "disk" when a kernel was compiled or loaded for this call
    (numba_loader.NumbaModule.call), else "memory"."""
    m, k = X.shape
    rows, width, chunks, ntiles = grid(m, k)
    mod = _kernels()
    out, origins, compile_ms = {}, [], 0.0

    def run(fn, *args):
        nonlocal compile_ms
        _, origin, ms, _ = mod.call(fn, runner=lambda entry: _cpu._run_morsels(entry, ntiles, args))
        origins.append(origin)
        compile_ms += ms

    def combine(fn, *args):
        nonlocal compile_ms
        res, origin, ms, _ = mod.call(fn, *args)
        origins.append(origin)
        compile_ms += ms
        return res
    if "sum" in ops:
        part = np.empty((chunks, k), sum_acc(X.dtype.name))
        run("col_sum_tiles", X, part, rows, width)
        # one row chunk: its partials are the sums, no combine (with a second fresh k-vector
        # per call, (10, 1e6) float32 took 4-13 ms instead of 1.5: likely page faults)
        out["sum"] = part[0] if chunks == 1 else combine("col_sum_combine", part)
    wanted = [op for op in ("min", "max") if op in ops]
    if wanted:
        lo_p, hi_p = np.empty((chunks, k), X.dtype), np.empty((chunks, k), X.dtype)
        nan_p = np.empty((chunks, k), np.bool_)
        run("col_minmax_tiles", X, lo_p, hi_p, nan_p, rows, width,
            2 if len(wanted) == 2 else int(wanted[0] == "max"))
        mn, mx, nan = ((lo_p[0], hi_p[0], nan_p[0]) if chunks == 1
                       else combine("col_minmax_combine", lo_p, hi_p, nan_p))
        for op, v in (("min", mn), ("max", mx)):
            if op in wanted:
                if nan.any():
                    v = np.where(nan, np.array(np.nan, v.dtype), v)
                out[op] = v
    origin = next((o for o in ("compiled", "disk") if o in origins), "memory")
    return out, origin, compile_ms


def in_morsels(m: int, k: int) -> int:
    """How many morsels reduce_columns runs an (m, k) array's tiles as (1: one call here)."""
    return _cpu._in_morsels(grid(m, k)[3])
