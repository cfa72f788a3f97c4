"""The cpu backend's column reductions of scalarized small elements: `qc.query(X).sum()`
(= X.sum(axis=0)), `min`, `max`, `mean` and `agg` of these, for X of shape (n, k) or
(n, a, b) with k (a*b) <= shaped.MAX_SCALARS values per element.

Scalarization (shaped.py) hands the pass k strided columns X[:, j]. The generic reduce
(_codegen/ops/reduce/cpu.py) sums each column on its own and copies a strided float column
to a contiguous one first (so its vectorised sums keep their bits): k passes over X's cache
lines. Here a pass that only reduces loaded columns (every aggregate a sum / min / max of
one input, or the count; no filter, no parameters) and whose inputs at run time are views
of one row-major array -- column j starts j column steps after column 0, all with one row
stride -- runs rows_columns.py's kernel on that (n, k) array instead: each row read once,
contiguously, into a vector of k partials per tile. Anything else, and small inputs (fewer than
MIN_VALUES values: the generic serial entry is as fast there), runs the generic pass.
"""
from __future__ import annotations

import time

import numpy as np

from querycompute._codegen.ir import expr as E
from querycompute._codegen.elements import component_view
from querycompute._codegen.ir.program import Pass, Reduce

from .rows_columns import grid, in_morsels, reduce_columns, sum_acc
from ..base import KernelRun, Prepared

MIN_VALUES = 1 << 15          # n * k below which the generic pass runs
_DTYPES = ("float32", "float64", "int8", "int16", "int32", "int64",
           "uint8", "uint16", "uint32", "uint64")    # float16 / bool: the generic pass


def column_aggs(p: Pass):
    """((op, input index or -1), ...) per aggregate when pass p only reduces loaded columns
    (two or more) of one dtype; else None."""
    prog = p.program
    if not isinstance(p.terminal, Reduce) or prog.has_filter or prog.params or len(prog.inputs) < 2:
        return None                       # (one input: a 1-D sum, the generic pass's case)
    dtypes = {s.dtype for s in prog.inputs}
    if len(dtypes) != 1 or dtypes.pop() not in _DTYPES or p.stage_op != "reduce":
        return None
    lets = {}
    for stmt in prog.body:
        expr = getattr(stmt, "expr", None)
        if expr is None:
            return None
        lets[stmt.name] = expr
    out = []
    for agg in p.terminal.aggs:
        if agg.op == "count" and not agg.values:
            out.append(("count", -1))
            continue
        if agg.op not in ("sum", "min", "max") or len(agg.values) != 1:
            return None
        v = _unlet(agg.values[0], lets)
        if agg.op == "sum" and isinstance(v, E.Cast):       # int8 -> int64 before a sum
            v = _unlet(v.x, lets)
        if not isinstance(v, E.Load):
            return None
        d = prog.inputs[v.input].dtype
        if agg.dtype != (sum_acc(d) if agg.op == "sum" else d):
            return None
        out.append((agg.op, v.input))
    return tuple(out)


def _unlet(v, lets: dict):
    while isinstance(v, E.Var) and v.name in lets:
        v = lets[v.name]
    return v


def as_rows(inputs) -> np.ndarray | None:
    """The (n, k) array whose columns the 1-D `inputs` are (_codegen/elements.component_view, read-only),
    or None when they are not views of one row-major array (column j at j column steps from
    column 0, one row stride at least a row's span): then the generic pass runs (an F-ordered
    X's columns are contiguous already, and the generic pass reads them as such)."""
    view = component_view(inputs)
    if view is None:
        return None
    stride, step = view.strides
    if step <= 0 or stride < len(inputs) * step:
        return None
    view.flags.writeable = False
    return view


def wrap(p: Pass, generic) -> Prepared:
    """`generic()` (the pass compiled as usual), or a ColumnsPrepared that compiles it only
    when a call needs it (a small or non-row-major input): the first `qc.query(X).sum()`
    compiles (or loads from numba's disk cache) just the column kernel."""
    aggs = column_aggs(p)
    return generic() if aggs is None else ColumnsPrepared(p, generic, aggs)


class ColumnsPrepared(Prepared):
    """Runs rows_columns' kernel when the inputs allow it, else the generic pass."""
    origin = "compiled"

    def __init__(self, p: Pass, generic, aggs: tuple):
        self._generic, self._make_generic = None, generic
        self.aggs = aggs
        self.ops = tuple(sorted({op for op, _ in aggs if op != "count"}))
        self.types = tuple(np.dtype(a.dtype).type for a in p.terminal.aggs)

    @property
    def generic(self) -> Prepared:
        if self._generic is None:
            self._generic = self._make_generic()
        return self._generic

    def run_quick(self, inputs, params, n):
        if n * len(inputs) < MIN_VALUES:
            return self.generic.run_quick(inputs, params, n)
        X = as_rows(inputs)
        if X is None:
            return self.generic.run_quick(inputs, params, n)
        t0 = time.perf_counter()
        vecs, cache, compile_ms = reduce_columns(X, self.ops)
        result = [n if op == "count" else t(vecs[op][j])
                  for (op, j), t in zip(self.aggs, self.types)]
        ms = (time.perf_counter() - t0) * 1e3 - compile_ms
        rows, width, _, ntiles = grid(*X.shape)
        kind = "inline" if in_morsels(*X.shape) == 1 else "morsels"
        return result, ("columns", kind, (ntiles,), (rows, width), ms, cache, compile_ms)

    def trace_rows(self, row):
        if not (type(row) is tuple and row and row[0] == "columns"):
            return self.generic.trace_rows(row)
        _, kind, tiles, block, ms, cache, compile_ms = row
        # kind: the tiles ran as one call on this thread ("inline") or by morsels; cache:
        # where the kernels' code came from on their first run (numba_loader), then memory
        return [KernelRun(f"qc_columns_{kind}", "numba", tiles, block, cache, compile_ms, ms)]
