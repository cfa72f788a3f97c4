"""The numpy backend's Reduce: whole-array NumPy calls over windows of the input.

A long input (a `qc.range(10**12)`, a huge memmap) is never materialised: the pass is
evaluated WINDOW elements at a time, and each aggregate keeps a partial state that the windows
update in order:

    sum     integers: the windows' np.sum values, added. Floats: the cpu kernel's fixed
            order (_codegen/sum_order.py: lanes, blocks, chunks; a dropped element adds
            -0.0), so the numpy tier's bits are the kernel's: each window gives its chunk
            totals (a window is a whole number of chunks), added as a tree at the end
    count   added
    min/max np.min / np.max of each window, then of the windows (NaN propagates); of -0.0
            and 0.0 min gives -0.0 and max 0.0 wherever they are (the kernels' order keys
            rank -0.0 below 0.0; NumPy's own pick depends on the positions)
    any/all or / and; settled once True / False
    first   the first window with a survivor; settled then
    fold    (has, value): a window's kept values are folded as a balanced tree of pairs that
            keeps element order (any grouping gives the same value for an associative
            combine), the window's value joins the running one on the right, and the seed
            goes in once at the end: combine(seed, total), or the seed for no survivor;
            an `in_order` fold (not known associative) is LINQ's fold itself: the seed, then
            each survivor in element order, one at a time (`fold_in_order`)

When every aggregate is settled (a pass of any/all/first) the remaining windows are skipped.
The windows' partials join with the host-side combine rules of _codegen/combine.py, in
window order.
"""
from __future__ import annotations

import numpy as np

from querycompute._codegen import sum_order
from querycompute._codegen.combine import add_all, combine, decided

WINDOW = 1 << 20        # elements per window: bounded memory, whole-array NumPy speed
assert WINDOW % sum_order.CHUNK == 0    # a float sum's chunks never straddle two windows


def run_reduce(p, evaluate, n: int) -> list:
    """The reference of the "reduce" stage op: the raw results of pass `p`'s Reduce terminal
    (see `reduce_windows`)."""
    return reduce_windows(p.terminal.aggs, evaluate, n)


def reduce_windows(aggs, evaluate, n: int) -> list:
    """Raw results (backends/base.py format) of `aggs` over elements 0..n-1.
    `evaluate(lo, hi)` -> (ev, keep): an evaluator over elements lo..hi-1 whose program
    body has run (ev.full(expr) gives an expression's values), and the survivors' mask (None:
    all survive)."""
    unknown = [a.op for a in aggs if a.op not in _STATES]
    if unknown:
        raise TypeError(f"numpy backend: unknown aggregate {unknown[0]!r}")
    states = [_STATES[a.op](a) for a in aggs]
    for lo in range(0, n, WINDOW):
        hi = min(n, lo + WINDOW)
        ev, keep = evaluate(lo, hi)
        for st in states:
            if not st.settled:
                st.add(ev, keep, lo, hi - lo)
        if all(st.settled for st in states):
            break
    return [st.result() for st in states]


def _kept(ev, e, keep):
    v = ev.full(e)
    return v if keep is None else v[keep]


class _Agg:
    settled = False

    def __init__(self, agg):
        self.agg = agg
        self.t = np.dtype(agg.dtype).type


class _Count(_Agg):
    def __init__(self, agg):
        super().__init__(agg)
        self.total = 0

    def add(self, ev, keep, lo, m):
        self.total += m if keep is None else int(np.count_nonzero(keep))

    def result(self):
        return self.total


class _Sum(_Agg):
    def __init__(self, agg):
        super().__init__(agg)
        self.parts = []

        self.float = np.dtype(agg.dtype).kind == "f"

    def add(self, ev, keep, lo, m):
        if not self.float:
            self.parts.append(np.sum(_kept(ev, self.agg.values[0], keep), dtype=self.agg.dtype))
            return
        x = ev.full(self.agg.values[0])
        if keep is not None:
            x = np.where(keep, x, self.t(-0.0))
        self.parts.append(sum_order.chunk_totals(np.ascontiguousarray(x, self.agg.dtype)))

    def result(self):
        if self.float:
            chunks = np.concatenate(self.parts) if self.parts else np.empty(0, self.agg.dtype)
            return sum_order.total(chunks, self.agg.dtype)
        return add_all(self.parts, self.agg.dtype)


class _MinMax(_Agg):
    def __init__(self, agg):
        super().__init__(agg)
        self.value = None            # None: no element yet (combine skips it)
        self.pick = np.min if agg.op == "min" else np.max

    def add(self, ev, keep, lo, m):
        x = _kept(ev, self.agg.values[0], keep)
        if len(x):
            v = self.pick(x)
            if v == 0 and x.dtype.kind == "f":     # the sign the kernels give (module doc)
                v = signed_zero(self.agg.op, x[x == 0])
            if self.value is not None and v == 0 and self.value == 0:
                v = signed_zero(self.agg.op, np.array([self.value, v]))
            self.value = combine(self.agg.op, self.value, v)

    def result(self):
        return self.t(0) if self.value is None else self.t(self.value)


def signed_zero(op: str, zeros: np.ndarray):
    """min / max of float zeros as the kernels rank them: -0.0 below 0.0."""
    neg = np.signbit(zeros)
    t = zeros.dtype.type
    if op == "min":
        return t(-0.0) if neg.any() else t(0.0)
    return t(0.0) if not neg.all() else t(-0.0)


class _AnyAll(_Agg):
    def __init__(self, agg):
        super().__init__(agg)
        self.value = agg.op == "all"

    def add(self, ev, keep, lo, m):
        x = _kept(ev, self.agg.values[0], keep)
        w = bool(np.any(x)) if self.agg.op == "any" else bool(np.all(x))
        self.value = combine(self.agg.op, self.value, w)
        self.settled = decided(self.agg.op, self.value)

    def result(self):
        return self.value


class _First(_Agg):
    def __init__(self, agg):
        super().__init__(agg)
        self.found = (-1, ())

    def add(self, ev, keep, lo, m):
        if m == 0 or (keep is not None and not keep.any()):
            return
        idx = 0 if keep is None else int(np.argmax(keep))
        self.found = (lo + idx, tuple(np.dtype(e.dtype).type(ev.full(e)[idx]) for e in self.agg.values))
        self.settled = True          # the first window with a survivor decides

    def result(self):
        return self.found


def fold_in_order(ev, combine, dtype: str, acc, items):
    """`acc` folded with items[0], items[1], ... one at a time, in order: combine(acc, item)
    evaluated by `ev` on single values (a fold whose combine is not known associative)."""
    t = np.dtype(dtype)
    n = ev.n
    ev.n = 1
    try:
        with np.errstate(all="ignore"):
            for item in items:
                ev.vars["acc"], ev.vars["item"] = acc, item
                acc = np.asarray(ev(combine)).astype(t, copy=False).reshape(())[()]
    finally:
        ev.n = n
    return acc


class _Fold(_Agg):
    def __init__(self, agg):
        super().__init__(agg)
        self.value = None            # None: no survivor yet (the empty state)
        self.ev = None
        if agg.in_order:             # LINQ's fold: the seed first
            self.value = np.dtype(agg.dtype).type(agg.seed.value)

    def combine(self, ev, acc, item) -> np.ndarray:
        """combine(acc, item) elementwise over equal-length arrays."""
        ev.vars["acc"], ev.vars["item"] = acc, item
        out = np.asarray(ev(self.agg.combine), dtype=self.agg.dtype)
        return np.broadcast_to(out, (len(acc),))

    def add(self, ev, keep, lo, m):
        x = np.ascontiguousarray(_kept(ev, self.agg.values[0], keep))
        self.ev = ev
        if self.agg.in_order:
            self.value = fold_in_order(ev, self.agg.combine, self.agg.dtype, self.value, x)
            return
        if not len(x):
            return
        while len(x) > 1:            # pairs (0, 1), (2, 3), ...; an odd last one moves up as is
            even = len(x) - len(x) % 2
            x = np.concatenate([self.combine(ev, x[0:even:2], x[1:even:2]), x[even:]])
        self.value = x if self.value is None else self.combine(ev, self.value, x)

    def result(self):
        if self.agg.in_order:
            return self.t(self.value)
        seed = np.array([self.agg.seed.value], dtype=self.agg.dtype)
        if self.value is None:
            return self.t(seed[0])
        return self.t(self.combine(self.ev, seed, self.value)[0])


_STATES = {"count": _Count, "sum": _Sum, "min": _MinMax, "max": _MinMax, "any": _AnyAll,
           "all": _AnyAll, "first": _First, "fold": _Fold}
