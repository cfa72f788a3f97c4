"""The in-order fold rule's refusals (DESIGN section 3, `aggregate`): a fold whose function
the compiler cannot prove associative (_codegen/associative.py) and the user did not state
`associative=True` is an `in_order` Agg / GroupAgg / ScanSpec. The numpy and cpu backends
run it sequentially in element order; the GPU dialects have only parallel trees, so the
engine refuses it there before compiling (`refuse_parallel`; `auto` then runs on cpu), and
Dask refuses it (partials.FoldRule: chunk partials cannot be combined).
"""
from __future__ import annotations

from querycompute._codegen.program import Reduce
from querycompute._codegen.pretty import fmt
from querycompute._codegen.stage_specs import GroupSpec, ScanSpec

from ..errors import FoldOrderError

SEQUENTIAL = ("numpy", "cpu")        # backends with an in-order fold


def in_order_folds(lowered) -> list:
    """The combine expressions of the in-order folds of a plan (plan.lower's result)."""
    out = []
    terminal = getattr(getattr(lowered, "pass_", None), "terminal", None)
    if isinstance(terminal, Reduce):
        out += [a.combine for a in terminal.aggs if a.op == "fold" and a.in_order]
    for stage in getattr(lowered, "stages", ()) if getattr(lowered, "staged", False) else ():
        inner = getattr(stage, "lowered", None)
        if inner is not None:
            out += in_order_folds(inner)
        spec = getattr(stage, "spec", None)
        if isinstance(spec, ScanSpec) and spec.in_order:
            out.append(spec.combine)
        elif isinstance(spec, GroupSpec):
            out += [a.combine for a in spec.aggs if a.op == "fold" and a.in_order]
    return out


def message(combine, where: str) -> str:
    """Why `where` refuses the fold whose combine is `combine`, and what to do."""
    return (f"{where}: the fold function (acc, item) -> {fmt(combine)} is not provably associative "
            f"(proved: + * min max & | ^, keep last / first, and compositions of them), so a "
            f"parallel fold could change its result; if it is associative, say so with "
            f"associative=True (aggregate(func, seed, associative=True), scan(...), "
            f"qc.aggregate(...)), else run it in element order with .on(\"cpu\")")


def refuse_parallel(backend: str, lowered) -> None:
    """FoldOrderError when `backend` folds in parallel only and the plan has an in-order fold."""
    if backend in SEQUENTIAL:
        return
    folds = in_order_folds(lowered)
    if folds:
        raise FoldOrderError(message(folds[0], f"backend {backend!r}"))
