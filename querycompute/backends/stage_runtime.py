"""The column operations a backend runs between fused passes, and their numpy reference.

A staged plan (querycompute/stages.py) alternates fused passes (a backend's Prepared) with
column operations on the columns a pass produced: sort permutations (order_by, top-k,
min-by), gathers, scans and distinct's first-occurrence flags. Each backend has one
`StageRuntime`; `NumpyStages` below is the reference the others are tested against.

Columns are 1-D host numpy arrays of one length n (the next stage's input). Every method
appends one `KernelRun` per kernel (or numpy step) it ran to `rows`, for qc.last_trace().
The operations are defined in querycompute/_codegen/stage_specs.py and order_keys.py.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from querycompute._codegen import order_keys
from querycompute._codegen.stage_specs import ScanSpec, SortSpec

from .base import KernelRun, now_ms


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

    def first_occurrence(self, spec: SortSpec, keys: Sequence[np.ndarray], rows: list) -> np.ndarray:
        """bool keep flags: row i's keys differ from those of every earlier row."""
        raise NotImplementedError


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


def scan_reference(spec: ScanSpec, values: np.ndarray, params: Sequence) -> np.ndarray:
    """Inclusive scan by recursive doubling (step d combines element i - d into i: a fixed
    grouping that keeps element order), then the seed combined in front of every prefix."""
    from .numpy_ref import _Eval
    n = len(values)
    dtype = np.dtype(spec.dtype)
    ev = _Eval((), params, [p.name for p in spec.params], n)

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
