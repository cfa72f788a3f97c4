"""numba kernels for long rows (rows.py): generated source, compiled once per plan.

row-per-iteration: `for i in prange(m)`: each row step is an inner loop over j (8
independent accumulator lanes, combined pairwise, so LLVM may pack them into SIMD registers
without reassociating) that evaluates the step's entry expression (printed by the numba dialect's ExprPrinter, so the
arithmetic is exactly the element kernels') and folds it into an accumulator; float16 and
float32 sums accumulate in float64 (never less accurate than NumPy's pairwise sum).
column-tiled: rows_columns.py's kernel (the cpu backend's one column reduction).
"""
from __future__ import annotations

import numpy as np

from querycompute._codegen import dtypes as D
from querycompute._codegen.dialects.numba_py_expr import ExprPrinter, register_type
from querycompute._codegen.dialects.numba_py_helpers import helper_source

LANES = 8          # accumulators per row step (as benchmarks/peer_numba_lanes.py)
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


def row_source(plan) -> str:
    helpers: set = set()
    params = [f"p_{p}" for p in plan.params]
    body = ["    m = X.shape[0]", "    k = X.shape[1]",
            f"    out = np.empty(m, {register_type(plan.final.dtype)})",
            "    for i in prange(m):"]
    bound: dict[str, str] = {}
    for st in plan.steps:
        acc = f"a_{st.name}"
        pr = ExprPrinter(lambda _i: "x", lambda n: f"p_{n}", "i", helpers)
        for name, py in bound.items():
            pr.bind_var(name, py)
        t = pr.value(st.entry)
        lanes = [f"{acc}_{L}" for L in range(LANES)]
        body += [f"        {ln} = {_init(st.op, st.dtype)}" for ln in lanes]
        body += ["        j = 0", f"        while j + {LANES} <= k:"]
        for L, lane in enumerate(lanes):          # independent accumulators: ILP / SIMD
            body += [f"            x = X[i, j + {L}]" if L else "            x = X[i, j]"]
            body += [f"            {ln}" for ln in pr.lines + [_fold(st.op, lane, t, st.dtype)]]
        body += [f"            j += {LANES}", "        while j < k:", "            x = X[i, j]"]
        body += [f"            {ln}" for ln in pr.lines + [_fold(st.op, lanes[0], t, st.dtype),
                                                       "j += 1"]]
        while len(lanes) > 1:                      # combine lanes pairwise
            for a_, b_ in zip(lanes[0::2], lanes[1::2]):
                body.append(f"        {_fold(st.op, a_, b_, st.dtype)}")
            lanes = lanes[0::2]
        body.append(f"        {acc} = {lanes[0]}")
        body.append(f"        v_{st.name} = {register_type(st.dtype)}({acc})" if st.dtype != "bool"
                    else f"        v_{st.name} = {acc}")
        if st.dtype == "float16":
            body[-1] = f"        v_{st.name} = np.float32({acc})"
        bound[st.name] = f"v_{st.name}"
    pr = ExprPrinter(lambda _i: "x", lambda n: f"p_{n}", "i", helpers)
    for name, py in bound.items():
        pr.bind_var(name, py)
    t = pr.value(plan.final)
    body += [f"        {ln}" for ln in pr.lines] + [f"        out[i] = {t}", "    return out"]
    head = ["import math", "import numpy as np", "from numba import njit, prange", ""]
    helper_text = [helper_source(kind, ft) for kind, ft in sorted(helpers, key=str)]
    sig = ", ".join(["X"] + params)
    kernel = ["@njit(parallel=True, error_model='numpy', fastmath=False)",
              f"def qc_rows({sig}):"] + body
    # the serial flavour (small inputs: no thread-pool wake-up); prange runs as range
    serial = ["@njit(error_model='numpy', fastmath=False)", f"def qc_rows_serial({sig}):"] + body
    return "\n".join(head) + "\n\n" + "\n\n\n".join(
        helper_text + ["\n".join(kernel), "\n".join(serial)]) + "\n"


def compile_plan(plan):
    """A function X, *params -> the plan's result array (numba compiles each flavour on its
    first call)."""
    if plan.strategy != "column-tiled":
        from .rows_columns import PARALLEL_MIN
        ns: dict = {}
        exec(compile(row_source(plan), "<querycompute long rows: qc_rows>", "exec"), ns)
        parallel, serial = ns["qc_rows"], ns["qc_rows_serial"]

        def rows(X, *p):
            out = (parallel if X.size >= PARALLEL_MIN else serial)(X, *p)
            return out.astype(np.float16) if plan.final.dtype == "float16" else out
        return rows
    from .rows_run import _column
    kind = plan.column_kind

    def columns(X):                 # rows_columns.py: tiles of row chunks x column blocks
        if len(X) == 0:
            return _column(kind, np.zeros((0, X.shape[1]), X.dtype))
        from .rows_columns import reduce_columns
        from .terminals import mean_dtype, sum_dtype
        res = reduce_columns(X, ("sum" if kind == "mean" else kind,))
        res = res["sum" if kind == "mean" else kind]
        if kind == "mean":
            acc, out = mean_dtype(plan.dtype)
            return (res.astype(acc) / np.array(len(X), acc)).astype(out)
        if kind == "sum":
            return res.astype(sum_dtype(plan.dtype)[1], copy=False)
        return res.astype(plan.dtype, copy=False)
    return columns
