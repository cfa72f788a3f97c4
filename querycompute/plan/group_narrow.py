"""A group_by's 64-bit sums fed with their narrow values, for backends without 64-bit types.

NumPy sums bool and integers of at most 32 bits in int64 (uint32 in uint64) and means them
in float64, so group_plan.py's pass stores such a sum's values cast to that accumulator
(`Cast(x, int64)`) and the group stage sums that column. WGSL has no 64-bit types: the pass
cannot compute that column. For a backend that says so (BackendCaps.wide_columns False, the
webgpu backend: `Backend.narrow_group_sums`), `narrow_group_values` rewrites the staged plan before it is compiled: every pass
output that only feeds a group stage's wide sum (`GroupAgg("sum", int64 | uint64 |
float64)`) and is `Cast(x, wide)` with x narrow (program.narrow_cast) stores x itself.
The GroupSpec is unchanged: the group stage receives values narrower than the aggregate's
dtype and must widen them as it sums (ops/group/reference.group_reference sums them in int64 /
uint64, exactly, with NumPy's wrap-around; a float64 mean divides that exact sum).

Which stage runtime runs that group stage is the backend's business: on webgpu the numpy
reference (its trace row names numpy; webgpu_stages.py). Plans for other backends are
never rewritten: their passes compute the 64-bit column as before.
"""
from __future__ import annotations

from dataclasses import replace

from querycompute._codegen.ir.program import narrow_cast

from ..backends import registry
from . import stage_kinds as S
from .group_plan import GroupStage


def for_backend(staged, backend):
    """The staged plan as `backend` (a Backend or its name) compiles it: narrowed where the
    backend's passes store no 64-bit columns (BackendCaps.wide_columns; the engine, source()
    and explain() all ask here)."""
    if isinstance(backend, str):
        backend = registry.get(backend)
    return staged if backend.caps.wide_columns else narrow_group_values(staged)


def narrow_group_values(staged):
    """`staged` with the narrow values of every group stage's wide sums (module doc), or
    `staged` itself when nothing changes."""
    stages, changed = list(staged.stages), False
    for i in range(len(stages) - 1):
        p, g = stages[i], stages[i + 1]
        if type(p) is not S.PassStage or type(g) is not GroupStage:
            continue
        outs = list(p.lowered.pass_.program.outputs)
        for agg, col in zip(g.spec.aggs, g.values):
            if agg.op != "sum" or col < 0:
                continue
            x = narrow_cast(outs[col], agg.dtype)
            if x is not None:
                outs[col] = x
        if tuple(outs) == p.lowered.pass_.program.outputs:
            continue
        pass_ = p.lowered.pass_
        program = replace(pass_.program, outputs=tuple(outs))
        stages[i] = replace(p, lowered=replace(p.lowered, pass_=replace(pass_, program=program)))
        changed = True
    return replace(staged, stages=tuple(stages)) if changed else staged
