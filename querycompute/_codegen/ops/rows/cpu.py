"""The cpu printer of long rows (plan/rows.py): a row plan as numba source, compiled once per
plan by backends/cpu/rows_numba.py and loaded through the cpu backend's one numba loader (so
a new process loads it from the disk cache).

row-per-iteration: ONE entry point, `qc_rows(c0, c1, R, X, out, *params)`, over the rows
[c0 * R, min(m, c1 * R)) (units c0..c1 of R rows each), compiled without the GIL and run by
the cpu backend's morsel scheduler (backends/cpu/morsels.py: one call on the caller's thread
for a small input, else morsels of units handed to the cores); it writes out[i] per row, so
who ran which rows never changes a bit. Each row step is an inner loop over j that
evaluates the step's entry expression (printed by the numba dialect's ExprPrinter, so the
arithmetic is exactly the element kernels') and folds it into an accumulator. A sum step is
a strict entry function called from a loop compiled with `reassoc` (see _sum_step): LLVM
vectorises it (measured 2.9 -> 1.0 ms CPU for a (1e4, 1e3) float32 row sum); float16 and
float32 sums accumulate in float64 (never less accurate than NumPy's pairwise sum; the
vector lanes' order is fixed by the compiled code, so a given input always gives the same
bits). Float min / max steps fold integer order keys plus a NaN flag (vectorised with no
fast-math flag, _minmax_step); prod / and / or keep 8 independent accumulator lanes, combined
pairwise. exp of float32 values goes through `_exp32` (vectorisable, correctly rounded).
column-tiled: cpu_kernels.py (backends/cpu/rows_columns.py runs it).
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as D
from ...dialects.numba_py_expr import ExprPrinter, register_type
from ...dialects.numba_py_helpers import helper_source
from ...dialects.numba_py_runtime import PRELUDE
from ...order_keys import minmax_key, minmax_key_text

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
            "    for i in range(c0 * R, min(m, c1 * R)):"]
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
    body += [f"        {ln}" for ln in pr.lines] + [f"        out[i] = {t}", "    return 0"]
    head = [PRELUDE]                # numpy, math, njit, the bit-cast intrinsics
    helper_text = [helper_source(kind, ft, cache=True) for kind, ft in sorted(helpers, key=str)]
    sig = ", ".join(["c0", "c1", "R", "X", "out"] + params)
    kernel = ["@njit(nogil=True, error_model='numpy', fastmath=False, cache=True)",
              f"def qc_rows({sig}):"] + body
    return "\n".join(head) + "\n\n" + "\n\n\n".join(helper_text + funcs + ["\n".join(kernel)]) + "\n"


def out_dtype(plan) -> np.dtype:
    """The dtype of qc_rows' `out` (the caller allocates it): the final value's register
    type (float16 is held in float32 and rounded by the caller)."""
    d = plan.final.dtype
    return np.dtype("float32" if d == "float16" else d)
