"""The scan's reference (the numpy backend runs it; every runtime's scan equals it): recursive
doubling over whole arrays, a fixed grouping that keeps element order, the seed combined in
front; a combine not known associative runs LINQ's running fold one element at a time."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...numpy_eval import Eval
from ...ir.stage_specs import ScanSpec
from ..reduce.reference import fold_in_order


def scan_reference(spec: ScanSpec, values: np.ndarray, params: Sequence) -> np.ndarray:
    """Inclusive scan by recursive doubling (step d combines element i - d into i: a fixed
    grouping that keeps element order), then the seed combined in front of every prefix.
    An `in_order` scan (combine not known associative) is the running fold itself, the
    seed first, one element at a time."""
    n = len(values)
    dtype = np.dtype(spec.dtype)
    ev = Eval((), params, [p.name for p in spec.params], n)
    if spec.in_order:
        out = np.empty(n, dtype=dtype)
        acc = dtype.type(spec.seed.value)
        for i, item in enumerate(np.asarray(values, dtype=dtype)):
            out[i] = acc = fold_in_order(ev, spec.combine, spec.dtype, acc, (item,))
        return out

    def combine(acc, item):
        ev.vars["acc"], ev.vars["item"] = acc, item
        with np.errstate(all="ignore"):
            out = np.asarray(ev(spec.combine)).astype(dtype, copy=False)
        return np.broadcast_to(out, (len(item),))

    x = np.array(values, dtype=dtype, copy=True)
    d = 1
    while d < n:
        x[d:] = combine(x[:-d].copy(), x[d:].copy())
        d *= 2
    if n:
        x = np.ascontiguousarray(combine(np.full(n, spec.seed.value, dtype=dtype), x))
    return x
