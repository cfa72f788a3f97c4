"""The numba dialect of a pass whose inputs are read through index columns: the pass after a
join reads `left[li[k]]` and `right[ri[k]]` directly, so the joined columns are never
gathered into new arrays (written, then read again) between the join and that pass.

A join gives its matches as two int64 columns of equal length m, li (this side's rows) and
ri (the other side's rows; -1 for a left_join's row without a match). The pass after it was
planned over the gathered columns c0..c{e-1} (this side's element) and c{e}..c{e+r-1} (the
other side's). `index(p, e, r, outer)` makes it an `IndexedPass`: the same program and
terminal with two more inputs, `li` and `ri`, and `via[k]` naming the index input each
column input k is read through. Its element function loads input k of element i as

    in_ck[in_li[i]]                                   (this side)
    in_ck[in_ri[i]]                                   (the other side, inner join)
    (in_ck[in_ri[i]] if in_ri[i] >= 0 else FILL)      (the other side, left_join)

where FILL is ops/join/reference.fill_value's value in the input's storage type (NaN, 0, False;
float16's NaN as its bits). These are exactly the values the gather would have stored, so
the pass's result equals the two-stage plan's bit for bit; only loads the pass uses are
printed, so a column the pass never reads is never touched. Every other part of the module
(the stage op's loops, a fused group_by's tables: ops/group/fused_cpu.py) is unchanged: they
all read inputs through the element function, over n = m elements.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..ir.program import InputSpec, Pass


@dataclass(frozen=True)
class IndexedPass(Pass):
    """Pass `name` whose input k is read through input via[k] (-1: directly); `filled[k]`:
    an index of -1 reads the fill value (module doc)."""
    via: tuple = ()
    filled: tuple = ()


def index(p: Pass, n_left: int, n_right: int, outer: bool) -> IndexedPass:
    """Pass `p` over a join's gathered columns (the first n_left this side's, the next
    n_right the other's) reading the ungathered columns through the pairs instead."""
    prog = p.program
    if len(prog.inputs) != n_left + n_right:
        raise ValueError(f"pass {p.name} has {len(prog.inputs)} inputs; a join gives "
                         f"{n_left} + {n_right} columns")
    li, ri = n_left + n_right, n_left + n_right + 1
    inputs = prog.inputs + (InputSpec("join_li", "int64"), InputSpec("join_ri", "int64"))
    via = (li,) * n_left + (ri,) * n_right + (-1, -1)
    filled = (False,) * n_left + (outer,) * n_right + (False, False)
    return IndexedPass(replace(prog, inputs=inputs), p.terminal, f"{p.name}_joined", via, filled)


def _fill_text(dtype: str) -> str:
    """ops/join/reference.fill_value in the input's storage type (float16 travels as uint16 bits)."""
    if dtype == "float16":
        return f"np.uint16({int(np.array(np.nan, np.float16).view(np.uint16))})"
    if dtype == "bool":
        return "False"
    kind = np.dtype(dtype).kind
    return f"np.{dtype}(np.nan)" if kind == "f" else f"np.{dtype}(0)"


def gathers(p: Pass) -> dict:
    """Input number -> the text loading element i through its index column (in the input's
    storage type), for an IndexedPass; {} for any other pass."""
    via = getattr(p, "via", ())
    out = {}
    for k, (v, fill) in enumerate(zip(via, getattr(p, "filled", ()))):
        if v < 0:
            continue
        spec, ix = p.program.inputs[k], f"in_{p.program.inputs[v].name}[i]"
        text = f"in_{spec.name}[{ix}]"
        out[k] = f"({text} if {ix} >= 0 else {_fill_text(spec.dtype)})" if fill else text
    return out
