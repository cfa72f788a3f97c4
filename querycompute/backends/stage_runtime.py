"""The column operations a backend runs between fused passes, and their numpy reference.

A staged plan (querycompute/plan/stages.py) alternates fused passes (a backend's Prepared) with
column operations on the columns a pass produced: sort permutations (order_by, top-k,
min-by), gathers, scans, distinct's first-occurrence flags, a join's pairs and a semi-join's
membership flags. Each backend has one
`StageRuntime`; `NumpyStages` below is the reference the others are tested against.

Columns are 1-D host numpy arrays of one length n (the next stage's input). Every method
appends one `KernelRun` per kernel (or numpy step) it ran to `rows`, for qc.last_trace().
The operations are defined in querycompute/_codegen/stage_specs.py and order_keys.py.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from querycompute._codegen import order_keys
from querycompute._codegen.combine import segments
from querycompute._codegen.stage_specs import GroupSpec, ScanSpec, SortSpec

from .base import KernelRun, now_ms
from .reference.joins import join_reference, semi_reference
from .reference.numpy_reduce import fold_in_order


class StageRuntime:
    """One backend's column operations (see the module docstring)."""
    name = "?"

    def sort(self, spec: SortSpec, keys: Sequence[np.ndarray], k: int | None, rows: list) -> np.ndarray:
        """int64 stable sort permutation of the rows of `keys`; with k, its first min(k, n)
        entries only (top-k: the k smallest rows, ties by index)."""
        raise NotImplementedError

    def sort_values(self, spec: SortSpec, key: np.ndarray, rows: list) -> np.ndarray:
        """The one key column itself, sorted (order_by() of plain values: no permutation is
        needed when the key is the element). Backends may override with a keys-only sort."""
        return self.gather([key], self.sort(spec, [key], None, rows), rows)[0]

    def gather(self, cols: Sequence[np.ndarray], perm: np.ndarray, rows: list) -> list:
        """[col[perm] for col in cols]."""
        raise NotImplementedError

    def scan(self, spec: ScanSpec, values: np.ndarray, params: Sequence, rows: list) -> np.ndarray:
        """The inclusive running fold of `values` (spec.dtype); `params` follow spec.params."""
        raise NotImplementedError

    def reverse(self, cols: Sequence, rows: list) -> list:
        """The columns in reverse order (a copy; GpuStages reverses on the device)."""
        from .gpu import device_columns as DC
        return [DC.reversed_column(c) for c in cols]

    def first_occurrence(self, spec: SortSpec, keys: Sequence[np.ndarray], rows: list) -> np.ndarray:
        """bool keep flags: row i's keys differ from those of every earlier row."""
        raise NotImplementedError

    def group_by(self, spec: GroupSpec, keys: Sequence[np.ndarray], values: Sequence, params: Sequence,
                 rows: list) -> tuple:
        """(group key columns, one result column per spec.aggs, int64 row count per group):
        groups in ascending key order (NaN last); `values` has one column per agg (None for
        count); `params` follow spec.params. A runtime without its own runs the numpy
        reference, and its trace row says so (dialect "numpy")."""
        return NumpyStages.group_by(self, spec, keys, values, params, rows)

    def join(self, left_keys: Sequence[np.ndarray], right_keys: Sequence[np.ndarray], outer: bool,
             rows: list) -> tuple:
        """(left indexes, right indexes), int64, of the matching row pairs in LINQ's order
        (reference/joins.join_reference defines it; `outer`: unmatched left rows with -1). A runtime
        without its own runs the numpy reference (its trace row says so)."""
        return NumpyStages.join(self, left_keys, right_keys, outer, rows)

    def semi_join(self, left_keys: Sequence[np.ndarray], right_keys: Sequence[np.ndarray],
                  rows: list) -> np.ndarray:
        """bool flags, one per left row: its key occurs among the right keys (the join's key
        equality; reference/joins.semi_reference defines it). A runtime without its own runs the
        numpy reference (its trace row says so)."""
        return NumpyStages.semi_join(self, left_keys, right_keys, rows)

    # explain()'s lines for an operator on this runtime, naming what really runs it; None:
    # the stage kind's own description (Stage.host_lines asks these)
    def describe_group_by(self, spec: GroupSpec) -> list | None:
        return None

    def describe_join(self, this_dtypes: Sequence[str], other_dtypes: Sequence[str],
                      semi: bool) -> list | None:
        """`this_dtypes`, `other_dtypes`: both sides' key column dtypes; `semi`: intersect_by /
        except_by (a flag per row) rather than join (pairs)."""
        return None

    def describe_distinct(self, spec: SortSpec) -> list | None:
        return None


def _row(rows: list, name: str, t0: float) -> None:
    rows.append(KernelRun(name, "numpy", cache="memory", run_ms=now_ms() - t0))


class NumpyStages(StageRuntime):
    """The reference: order_keys' bits and np.lexsort; a scan as a fixed tree of whole-array
    steps evaluating the combine expression with the numpy backend's interpreter."""
    name = "numpy"

    def sort(self, spec, keys, k, rows):
        t0 = now_ms()
        perm = order_keys.stable_order(list(keys), spec.descending)
        _row(rows, f"{spec.name}_lexsort", t0)
        return perm if k is None else perm[:k]

    def gather(self, cols, perm, rows):
        t0 = now_ms()
        out = [np.take(c, perm) for c in cols]
        _row(rows, "gather", t0)
        return out

    def scan(self, spec, values, params, rows):
        t0 = now_ms()
        out = scan_reference(spec, values, params)
        _row(rows, f"{spec.name}_doubling", t0)
        return out

    def first_occurrence(self, spec, keys, rows):
        t0 = now_ms()
        keep = order_keys.first_occurrence(list(keys))
        _row(rows, f"{spec.name}_first_occurrence", t0)
        return keep

    def join(self, left_keys, right_keys, outer, rows):
        t0 = now_ms()
        out = join_reference(left_keys, right_keys, outer)
        _row(rows, "join_sorted_probe", t0)
        return out

    def semi_join(self, left_keys, right_keys, rows):
        t0 = now_ms()
        out = semi_reference(left_keys, right_keys)
        _row(rows, "semi_join_sorted_probe", t0)
        return out

    def group_by(self, spec, keys, values, params, rows):
        t0 = now_ms()
        out = group_reference(spec, keys, values, params)
        _row(rows, f"{spec.name}_sorted_segments", t0)
        return out


def scan_reference(spec: ScanSpec, values: np.ndarray, params: Sequence) -> np.ndarray:
    """Inclusive scan by recursive doubling (step d combines element i - d into i: a fixed
    grouping that keeps element order), then the seed combined in front of every prefix.
    An `in_order` scan (combine not known associative) is the running fold itself, the
    seed first, one element at a time."""
    from .reference.numpy_ref import _Eval
    n = len(values)
    dtype = np.dtype(spec.dtype)
    ev = _Eval((), params, [p.name for p in spec.params], n)
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
    from .reference.numpy_ref import _Eval
    ev = _Eval((), params, [p.name for p in spec.params], 1)
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
