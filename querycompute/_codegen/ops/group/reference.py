"""group_by's reference (the numpy backend runs it; every runtime's group_by equals it): a
stable sort of the keys (order_keys.stable_order), runs of equal keys, each aggregated over
its rows in source order with the host combine's rule for runs (combine.segments), a fold by
a pairwise tree that keeps element order."""
from __future__ import annotations

import numpy as np

from ... import order_keys
from ...combine import segments
from ...numpy_eval import Eval
from ...ir.stage_specs import GroupSpec
from ..reduce.reference import fold_in_order


def group_reference(spec: GroupSpec, keys, values, params) -> tuple:
    """group_by by a stable sort of the keys: segments of equal bits, each aggregated over
    its rows in source order (np.add.reduceat / np.minimum.reduceat ...; a fold by a
    pairwise tree that keeps element order)."""
    keys = [np.asarray(k) for k in keys]
    n = len(keys[0])
    order = order_keys.stable_order(keys, (False,) * len(keys))
    starts = np.flatnonzero(order_keys.run_starts(keys, order))
    counts = np.diff(np.append(starts, n)).astype(np.int64)
    group_keys = [k[order[starts]] for k in keys]
    out = []
    for agg, v in zip(spec.aggs, values):
        if agg.op == "count":
            out.append(counts.copy())
            continue
        s = np.asarray(v)[order]
        if not len(starts):
            out.append(np.zeros(0, dtype=agg.dtype))
        elif agg.op == "first":
            out.append(s[starts])
        elif agg.op == "fold":
            out.append(_fold_segments(spec, agg, s, starts, n, params))
        else:
            with np.errstate(all="ignore"):
                if agg.op == "sum" and s.dtype != np.dtype(agg.dtype):
                    out.append(_wide_sums(s, starts, agg.dtype))
                else:      # the host combine's rule for runs (sum, min, max, any, all)
                    out.append(segments(agg.op, s, starts).astype(agg.dtype, copy=False))
    return group_keys, out, counts


def _wide_sums(s: np.ndarray, starts: np.ndarray, dtype: str) -> np.ndarray:
    """Segment sums of narrow values `s` (bool, integers of at most 32 bits: a webgpu pass
    stores them in their own type, group_narrow.py) in the aggregate's wide `dtype`: int64 /
    uint64 exactly with NumPy's wrap-around; float64 (a mean) from the exact int64 sum,
    rounded once."""
    acc = np.uint64 if dtype == "uint64" else np.int64
    return np.add.reduceat(s, starts, dtype=acc).astype(dtype, copy=False)


def _fold_segments(spec, agg, s, starts, n, params) -> np.ndarray:
    ev = Eval((), params, [p.name for p in spec.params], 1)
    res = np.empty(len(starts), dtype=agg.dtype)
    ends = np.append(starts[1:], n)
    for g, (a, b) in enumerate(zip(starts, ends)):
        x = s[a:b]
        if agg.in_order:         # not known associative: LINQ's fold, the seed first
            res[g] = fold_in_order(ev, agg.combine, agg.dtype, np.dtype(agg.dtype).type(agg.seed.value), x)
            continue
        while len(x) > 1:        # pairs (0, 1), (2, 3), ...: element order kept
            even = len(x) - len(x) % 2
            ev.vars["acc"], ev.vars["item"] = x[0:even:2], x[1:even:2]
            ev.n = even // 2
            with np.errstate(all="ignore"):
                pair = np.broadcast_to(np.asarray(ev(agg.combine), dtype=agg.dtype), (even // 2,))
            x = np.concatenate([pair, x[even:]])
        ev.vars["acc"] = np.array([agg.seed.value], dtype=agg.dtype)
        ev.vars["item"] = x[:1]
        ev.n = 1
        with np.errstate(all="ignore"):
            res[g] = np.asarray(ev(agg.combine), dtype=agg.dtype).reshape(-1)[0]
    return res
