"""The `numpy` backend: the reference every other backend is tested against.

It interprets the fused pass with whole-array NumPy operations, one IR node at a time, so its
semantics are NumPy's by construction: every expression is evaluated over all n elements
(dropped ones too; errors are silenced with errstate), the filters' masks are and-ed, and the
terminal reads the surviving elements. One function per stage op (Pass.stage_op, the kernel
compiler's querycompute/_codegen/ops/) runs the pass, through RUN_STAGE_OP: `run_map`,
`run_compact`, and `run_reduce` (ops/reduce/reference.py), which runs over windows of the input so a
long range is never materialised. No code is generated.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from querycompute._codegen.numpy_eval import Eval
from querycompute._codegen.ir.program import Filter, Let, Pass

from ..base import Backend, BackendCaps, KernelRun, Prepared, now_ms
from ..._codegen.ops.reduce.reference import run_reduce

class _NumpyPrepared(Prepared):
    def __init__(self, p: Pass):
        self.p = p
        self.names = tuple(ps.name for ps in p.program.params)

    def _body(self, inputs, params, lo: int, hi: int):
        """(evaluator, survivors' mask or None) of elements lo..hi-1 after the program body."""
        ev = Eval([a[lo:hi] for a in inputs], params, self.names, hi - lo, lo)
        keep = None
        for st in self.p.program.body:
            if isinstance(st, Let):
                ev.vars[st.name] = ev(st.expr)
            elif isinstance(st, Filter):
                m = ev.full(st.cond)
                keep = m.copy() if keep is None else keep & m
        return ev, keep

    def run_quick(self, inputs: Sequence[Any], params: Sequence[Any], n: int) -> tuple:
        """(raw results, run ms)."""
        t0 = now_ms()
        inputs = [np.asarray(a) for a in inputs]
        with np.errstate(all="ignore"):
            out = RUN_STAGE_OP[self.p.stage_op](self.p, lambda lo, hi: self._body(inputs, params, lo, hi), n)
        return out, now_ms() - t0

    def trace_rows(self, run_ms: float) -> list[KernelRun]:
        return [KernelRun(self.p.name, "numpy", cache="interpreted", run_ms=run_ms)]


# ---- one function per stage op: (pass, evaluate, n) -> raw results (backends/base.py) -------
# `evaluate(lo, hi)` -> (evaluator over elements lo..hi-1 after the program body, survivors'
# mask or None when the pass has no filter).
def run_map(p: Pass, evaluate, n: int) -> tuple:
    """Every element's outputs, in order."""
    ev, _ = evaluate(0, n)
    return tuple(np.array(ev.full(e)) for e in p.program.outputs)


def run_compact(p: Pass, evaluate, n: int) -> tuple:
    """The survivors' outputs, in order: a boolean mask keeps source order. With a ToArray
    window (lo, hi), the survivors of rank lo <= r < hi only."""
    ev, keep = evaluate(0, n)
    window = slice(None)
    if p.terminal.window is not None:
        lo, hi = (int(ev.params[w]) for w in p.terminal.window)
        if lo < 0 or hi < lo:
            raise ValueError(f"{p.name}: compaction window [{lo}, {hi}) needs 0 <= lo <= hi")
        window = slice(lo, hi)
    return tuple(np.array(ev.full(e)[keep][window]) for e in p.program.outputs)


RUN_STAGE_OP = {"map": run_map, "compact": run_compact, "reduce": run_reduce}


class NumpyBackend(Backend):
    name = "numpy"
    dialect = "numpy"
    # the reference interpreter: whole-array NumPy calls, folds in element order
    caps = BackendCaps(device="reference", in_order_fold=True, lookup_tables=True, tier_sums=True)

    def availability(self):
        return True, "NumPy reference interpreter (always available)"

    def source(self, p: Pass) -> str:
        from ...errors import QueryError
        raise QueryError("the numpy backend interprets the plan with NumPy calls and generates no "
                         "kernel source; ask for backend='cpu', 'cuda', 'opencl', 'webgpu' or 'metal'")

    def launch_shape(self, p: Pass, n: int):
        return [{"name": p.name, "grid": "whole arrays", "block": "-"}]

    def prepare(self, p: Pass) -> Prepared:
        return _NumpyPrepared(p)
