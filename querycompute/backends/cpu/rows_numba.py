"""numba kernels for long rows (rows.py): generated source, compiled once per plan and
loaded through the cpu backend's one numba loader, so a new process loads them from the disk
cache (numba_loader.py).

row-per-iteration: `for i in prange(m)`: each row step is an inner loop over j that
evaluates the step's entry expression (printed by the numba dialect's ExprPrinter, so the
arithmetic is exactly the element kernels') and folds it into an accumulator. A sum step is
a strict entry function called from a loop compiled with `reassoc` (see _sum_step): LLVM
vectorises it (measured 2.9 -> 1.0 ms CPU for a (1e4, 1e3) float32 row sum); float16 and
float32 sums accumulate in float64 (never less accurate than NumPy's pairwise sum; the
vector lanes' order is fixed by the compiled code, so a given input always gives the same
bits). Float min / max steps fold integer order keys plus a NaN flag (vectorised with no
fast-math flag, _minmax_step); prod / and / or keep 8 independent accumulator lanes, combined
pairwise. exp of float32 values goes through `_exp32` (vectorisable, correctly rounded).
Each plan has a parallel kernel (rows in prange) and a serial one for inputs below
parallel_min(plan) values.
column-tiled: rows_columns.py's kernel (the cpu backend's one column reduction).
"""
from __future__ import annotations

import time

import numpy as np

from querycompute._codegen import dtypes as D
from querycompute._codegen.dtypes import mean_dtype, sum_dtype
from querycompute._codegen.dialects.numba_py_expr import ExprPrinter, register_type
from querycompute._codegen.dialects.numba_py_helpers import helper_source
from querycompute._codegen.dialects.numba_py_runtime import PRELUDE
from querycompute._codegen.order_keys import minmax_key, minmax_key_text

from ..base import KernelRun
from ..reference.rows import _Rows, _column
from .numba_loader import load

LANES = 8          # accumulators per row step (as benchmarks/peer_numba_lanes.py)
# Inputs of this many values and more run the parallel kernel (rows in prange) when a row
# step calls a function (exp: ~1 ns per value on one core); plain sums, min and max are
# memory-bound like rows_columns' column sums and use its threshold (parallel_min).
ROWS_PARALLEL_MIN = 1 << 20
_FLOAT_ACC = {"float16": "np.float64", "float32": "np.float64", "float64": "np.float64"}


def _init(op: str, dtype: str) -> str:
    if op in ("and", "or"):
        return "True" if op == "and" else "False"
    if op in ("sum", "prod"):
        one = "1" if op == "prod" else "0"
        if op == "sum" and dtype in _FLOAT_ACC:
            return f"np.float64({one})"
        return f"{register_type(dtype)}({one})"
    if D.is_float(dtype):
        return f"{register_type(dtype)}({'np.inf' if op == 'min' else '-np.inf'})"
    info = np.iinfo(dtype)
    return f"{register_type(dtype)}({info.max if op == 'min' else info.min})"


def _fold(op: str, acc: str, t: str, dtype: str) -> str:
    if op == "sum":
        return f"{acc} = {acc} + {t}" if dtype in _FLOAT_ACC else f"{acc} = {register_type(dtype)}({acc} + {t})"
    if op == "prod":
        return f"{acc} = {register_type(dtype)}({acc} * {t})"
    if op == "and":
        return f"{acc} = {acc} and {t}"
    if op == "or":
        return f"{acc} = {acc} or {t}"
    cmp = "<" if op == "min" else ">"
    if D.is_float(dtype):                 # NaN propagates, as np.min / np.max
        return f"{acc} = {t} if ({t} {cmp} {acc} or {t} != {t}) and {acc} == {acc} else {acc}"
    return f"{acc} = {t} if {t} {cmp} {acc} else {acc}"


class _RowPrinter(ExprPrinter):
    """The numba dialect's printer, with float32 / float16 exp through the branch-free
    `_exp32` helper (numba_py_helpers), so a row step's loop over exp vectorises."""

    def _call(self, fn: str, x: str, d: str) -> str:
        if fn == "exp" and d in ("float32", "float16"):
            return self._round(d, f"{self._helper('exp32')}({x})")
        return super()._call(fn, x, d)


# every function carries cache=True: the module is loaded through the disk cache
# (numba_loader.py), and numba keeps its compiled code beside it there
_STRICT = "@njit(error_model='numpy', fastmath=False, cache=True)"
_REASSOC = "@njit(error_model='numpy', fastmath={'reassoc'}, cache=True)"


def _sum_step(st, pr, t: str, args: list) -> list:
    """A sum step as two functions: the entry (strict IEEE, printed by the dialect) and the
    loop over the row, the only function with `reassoc` -- its one float op is the
    accumulating add, so LLVM keeps vector lanes of partial sums (several per SIMD register)
    and nothing else may change. Inlined, the entry's ops keep their own strict flags."""
    entry = "\n".join([_STRICT, f"def qc_entry_{st.name}({', '.join(['x'] + args)}):"]
                      + [f"    {ln}" for ln in pr.lines] + [f"    return {t}"])
    call = f"qc_entry_{st.name}({', '.join(['row[j]'] + args)})"
    loop = "\n".join([_REASSOC, f"def qc_sum_{st.name}({', '.join(['row'] + args)}):",
                      f"    acc = {_init('sum', st.dtype)}", "    for j in range(row.shape[0]):",
                      f"        {_fold('sum', 'acc', call, st.dtype)}", "    return acc"])
    return [entry, loop]


def _minmax_step(st, pr, t: str, args: list) -> list:
    """A float min / max step as a strict entry function and a loop over the row that folds
    min/max keys -- the float's bits as an integer whose order is the floats' order
    (order_keys.minmax_key_text, as the generic reduce, _codegen/ops/reduce/cpu.py) -- with an integer max / min, which LLVM
    vectorises without any fast-math flag, plus an any-NaN flag (a NaN makes the result NaN,
    as np.max). Integer steps fold the values themselves."""
    entry = "\n".join([_STRICT, f"def qc_entry_{st.name}({', '.join(['x'] + args)}):"]
                      + [f"    {ln}" for ln in pr.lines] + [f"    return {t}"])
    call = f"qc_entry_{st.name}({', '.join(['row[j]'] + args)})"
    cmp = "<" if st.op == "min" else ">"
    head = [_STRICT, f"def qc_{st.op}_{st.name}({', '.join(['row'] + args)}):"]
    if not D.is_float(st.dtype):
        loop = head + [f"    acc = {_init(st.op, st.dtype)}", "    for j in range(row.shape[0]):",
                       f"        t = {call}", f"        acc = t if t {cmp} acc else acc", "    return acc"]
        return [entry, "\n".join(loop)]
    kt, w = ("np.int64", 64) if st.dtype == "float64" else ("np.int32", 32)
    ft = "np.float64" if st.dtype == "float64" else "np.float32"
    start = minmax_key(float("inf") if st.op == "min" else float("-inf"), "float64" if w == 64 else "float32")
    loop = head + [f"    acc = {kt}({start})", "    nan = False", "    for j in range(row.shape[0]):",
                   f"        x = {ft}({call})", "        b = float_bits(x)",
                   f"        key = {minmax_key_text('b', w)}",
                   f"        acc = key if key {cmp} acc else acc", "        nan |= x != x",
                   f"    return {ft}(np.nan) if nan else bits_float({kt}({minmax_key_text('acc', w)}))"]
    return [entry, "\n".join(loop)]


def _lane_step(st, pr, t: str, acc: str) -> list:
    """Kernel lines of a min / max / prod / and / or step: LANES independent accumulators
    (no reassociation needed), combined pairwise."""
    lanes = [f"{acc}_{L}" for L in range(LANES)]
    body = [f"        {ln} = {_init(st.op, st.dtype)}" for ln in lanes]
    body += ["        j = 0", f"        while j + {LANES} <= k:"]
    for L, lane in enumerate(lanes):
        body += [f"            x = X[i, j + {L}]" if L else "            x = X[i, j]"]
        body += [f"            {ln}" for ln in pr.lines + [_fold(st.op, lane, t, st.dtype)]]
    body += [f"            j += {LANES}", "        while j < k:", "            x = X[i, j]"]
    body += [f"            {ln}" for ln in pr.lines + [_fold(st.op, lanes[0], t, st.dtype), "j += 1"]]
    while len(lanes) > 1:
        for a_, b_ in zip(lanes[0::2], lanes[1::2]):
            body.append(f"        {_fold(st.op, a_, b_, st.dtype)}")
        lanes = lanes[0::2]
    return body + [f"        {acc} = {lanes[0]}"]


def row_source(plan) -> str:
    helpers: set = set()
    params = [f"p_{p}" for p in plan.params]
    body = ["    m = X.shape[0]", "    k = X.shape[1]",
            f"    out = np.empty(m, {register_type(plan.final.dtype)})",
            "    for i in prange(m):"]
    funcs: list[str] = []
    bound: dict[str, str] = {}
    for st in plan.steps:
        acc = f"a_{st.name}"
        pr = _RowPrinter(lambda _i: "x", lambda n: f"p_{n}", "i", helpers)
        for name, py in bound.items():
            pr.bind_var(name, py)
        t = pr.value(st.entry)
        args = list(bound.values()) + params
        if st.op in ("sum", "min", "max"):
            funcs += (_sum_step if st.op == "sum" else _minmax_step)(st, pr, t, args)
            body.append(f"        {acc} = qc_{st.op}_{st.name}({', '.join(['X[i]'] + args)})")
        else:
            body += _lane_step(st, pr, t, acc)
        body.append(f"        v_{st.name} = {register_type(st.dtype)}({acc})" if st.dtype != "bool"
                    else f"        v_{st.name} = {acc}")
        if st.dtype == "float16":
            body[-1] = f"        v_{st.name} = np.float32({acc})"
        bound[st.name] = f"v_{st.name}"
    pr = _RowPrinter(lambda _i: "x", lambda n: f"p_{n}", "i", helpers)
    for name, py in bound.items():
        pr.bind_var(name, py)
    t = pr.value(plan.final)
    body += [f"        {ln}" for ln in pr.lines] + [f"        out[i] = {t}", "    return out"]
    head = [PRELUDE]                # numpy, math, njit, prange, the bit-cast intrinsics
    helper_text = [helper_source(kind, ft, cache=True) for kind, ft in sorted(helpers, key=str)]
    sig = ", ".join(["X"] + params)
    kernel = ["@njit(parallel=True, error_model='numpy', fastmath=False, cache=True)",
              f"def qc_rows({sig}):"] + body
    # the serial flavour (small inputs: no thread-pool wake-up); prange runs as range
    serial = [_STRICT, f"def qc_rows_serial({sig}):"] + body
    return "\n".join(head) + "\n\n" + "\n\n\n".join(
        helper_text + funcs + ["\n".join(kernel), "\n".join(serial)]) + "\n"


def parallel_min(plan) -> int:
    """Values from which a row plan runs in parallel: ROWS_PARALLEL_MIN when a step calls a
    function (exp, log ...: compute-bound), else rows_columns.PARALLEL_MIN (a plain sum / min
    / max streams memory, which one core already saturates here)."""
    from querycompute._codegen import expr as E

    from .rows_columns import PARALLEL_MIN
    heavy = any(isinstance(n, E.Call) for st in plan.steps for n in E.walk(st.entry))
    return ROWS_PARALLEL_MIN if heavy else PARALLEL_MIN


def compile_plan(plan):
    """A function X, *params -> (the plan's result array, cache origin, compile ms): the
    plan's kernels loaded through the cpu backend's one numba loader and its disk cache
    (numba_loader.py); numba compiles each flavour, or loads it from the cache, on its first
    call, which the origin and compile ms of that call say."""
    from .cpu import launch
    if plan.strategy != "column-tiled":
        mod = load("qc_rows", row_source(plan))
        least = parallel_min(plan)

        def rows(X, *p):
            _, (out, cache, compile_ms, _) = launch(
                X.size >= least, lambda par: mod.call("qc_rows" if par else "qc_rows_serial", X, *p))
            return (out.astype(np.float16) if plan.final.dtype == "float16" else out), cache, compile_ms
        return rows
    kind = plan.column_kind

    def columns(X):                 # rows_columns.py: tiles of row chunks x column blocks
        if len(X) == 0:
            return _column(kind, np.zeros((0, X.shape[1]), X.dtype)), "memory", 0.0
        from .rows_columns import reduce_columns, wants_parallel
        op = "sum" if kind == "mean" else kind
        _, (res, cache, compile_ms) = launch(bool(wants_parallel(*X.shape)),
                                             lambda par: reduce_columns(X, (op,), par))
        res = res[op]
        if kind == "mean":
            acc, out = mean_dtype(plan.dtype)
            res = (res.astype(acc) / np.array(len(X), acc)).astype(out)
        elif kind == "sum":
            res = res.astype(sum_dtype(plan.dtype)[1], copy=False)
        else:
            res = res.astype(plan.dtype, copy=False)
        return res, cache, compile_ms
    return columns


class NumbaRows(_Rows):
    """Generated numba kernels (rows_numba.py), loaded through the cpu backend's numba loader
    (its disk cache); each flavour compiles, or loads from the cache, on its first call."""
    dialect = "numba"

    def __init__(self, plan):
        super().__init__(plan)
        t0 = time.perf_counter()
        self.kernel = compile_plan(plan)
        self.compile_ms = (time.perf_counter() - t0) * 1e3

    def run_quick(self, inputs, params, n):
        t0 = time.perf_counter()
        X = inputs[0]
        if X.dtype == np.float16:            # held as float32 (exact), rounded as float16
            X = X.astype(np.float32)
        out, cache, compile_ms = self.kernel(X, *params)
        return [out], ((time.perf_counter() - t0) * 1e3 - compile_ms, (n,), cache, compile_ms)

    def trace_rows(self, row):
        ms, grid, cache, compile_ms = row
        return [KernelRun(self.name, self.dialect, grid, (), cache, compile_ms, ms)]
