"""The host-side combine of partial results: how the partials of two consecutive runs of
elements (chunks, windows, Dask partitions, partial group tables) join into the partial of
both. The one home of these rules: every place that combines partials on the host calls them.

Rules per aggregate op (a = the earlier elements' partial, b = the later ones'):
    sum, count   a + b in the partial's own type (integers wrap as NumPy's do; a float sum's
                 value depends on the order the caller joins partials in, see below)
    min, max     np.minimum / np.maximum (a NaN wins; of -0.0 and 0.0 NumPy's pick)
    any, all     a or b / a and b (np.logical_or / np.logical_and per component of arrays)
    first        a unless it is empty
    last         b unless it is empty
An EMPTY partial is a run with no element where the op has no identity: None (a chunk's
min / max / first / last value), or an object array of Nones (the same for shaped
elements); it is skipped.

Raw results (backends/base.py's format, `combine_raw`) of a run [lo, hi) hold a first as
(index counted from lo, values), index -1 when the run has none; combine_raw shifts the
index to the whole input before joining. `decided(op, raw)`: no later partial can change
it (any True, all False, a first found); `all_decided(ops, raws)`: none of them can, so a
caller may stop reading.

Group tables (`merge_groups`): two partial group_by results concatenated (the earlier one
first), stably sorted by key (as order_keys orders: NaN last, all NaNs one key, -0.0 == 0.0)
and each run of equal keys reduced in row order with the rules above (`segments`; first:
the run's first row, which is the earlier table's).

The ORDER in which partials are joined is the caller's, and part of the result's bits (float
addition is not associative); each caller keeps one fixed order:
    run/streaming.py                    chunks left to right: total = combine(total, chunk)
    run/partials.py (Dask)              adjacent pairs, level by level (partials.tree)
    run/windows.py                      early-exit windows left to right (any / all / first:
                                        exact whatever the order)
    backends/webgpu/webgpu_windows.py   binding windows left to right
    ops/reduce/reference.py  windows left to right; a sum's window sums are added
                                        as NumPy sums an array of them (`add_all`)
Why in _codegen, below every layer: backends combine windows of their own (webgpu's
binding windows, the numpy reference's), and a backend must not import run/; run/partials.py
(Dask and streaming) calls the same functions, Dask's distinct / order_by / top-k partials
are joined with `concatenate` (dask/operators.py), and the numpy group_by reference
(backends/stage_runtime.py) reduces its groups' rows with `segments`.
"""
from __future__ import annotations

import numpy as np

_UFUNCS = {"sum": np.add, "count": np.add, "min": np.minimum, "max": np.maximum,
           "any": np.logical_or, "all": np.logical_and}


def is_empty(p) -> bool:
    """Whether the partial VALUE `p` stands for a run without an element: None, or an object
    array of Nones (shaped elements)."""
    return p is None or (isinstance(p, np.ndarray) and p.dtype == object
                         and all(v is None for v in p.flat))


def combine(op: str, a, b):
    """The partial of two consecutive runs, `a` the earlier one's (the module doc's rules)."""
    if op in ("min", "max", "first", "last"):
        if is_empty(a):
            return b
        if is_empty(b):
            return a
        if op == "first":
            return a
        if op == "last":
            return b
    elif op in ("any", "all") and np.ndim(a) == 0 and np.ndim(b) == 0:
        return (a or b) if op == "any" else (a and b)
    with np.errstate(all="ignore"):
        if op in ("sum", "count"):
            return a + b
        return _UFUNCS[op](a, b)


def found(raw_first) -> bool:
    """Whether a raw `first` (index, values) found an element (index -1: none)."""
    return raw_first[0] >= 0


def decided(op: str, raw) -> bool:
    """Whether no later partial can change the raw result `raw`: any True, all False, a
    first found."""
    if op == "first":
        return found(raw)
    if op == "any":
        return bool(raw)
    if op == "all":
        return not bool(raw)
    return False


def all_decided(ops, raw) -> bool:
    """Whether no later partial can change any of the raw results `raw` (one per op in
    `ops`): a caller reading runs in order stops here."""
    return all(decided(op, r) for op, r in zip(ops, raw))


def combine_raw(ops, acc, raw, lo: int) -> list:
    """Raw results (one per aggregate op in `ops`; backends/base.py's format) of the
    elements before `lo` (`acc`; None: there are none) joined with those of the run that
    starts at element `lo` (`raw`, its first's index counted from lo)."""
    raw = [(r[0] + lo, r[1]) if op == "first" and found(r) else r for op, r in zip(ops, raw)]
    if acc is None:
        return raw
    return [(a if found(a) else r) if op == "first" else combine(op, a, r)
            for op, a, r in zip(ops, acc, raw)]


def add_all(parts, dtype: str):
    """The sum of a list of partial sums as NumPy sums an array of them (np.sum: pairwise),
    in `dtype`; one part is itself (so a sum of -0.0s stays NumPy's)."""
    t = np.dtype(dtype).type
    if len(parts) == 1:
        return t(parts[0])
    return t(np.sum(np.array(parts, dtype=dtype), dtype=dtype))


def concatenate(parts: list):
    """The to_array partials of consecutive runs joined in order: an array, a dict of
    columns or a tuple / list of columns."""
    first = parts[0]
    if isinstance(first, np.ndarray):
        return np.concatenate(parts)
    if isinstance(first, dict):
        return {k: np.concatenate([p[k] for p in parts]) for k in first}
    if isinstance(first, (tuple, list)):
        return tuple(np.concatenate([p[j] for p in parts]) for j in range(len(first)))
    raise TypeError(f"to_array chunks of type {type(first).__name__} can't be concatenated")


def segments(op: str, x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each run's combined value: runs of `x` start at `starts` (sorted, the first 0)."""
    if op == "first":
        return x[starts]
    with np.errstate(over="ignore"):
        return _UFUNCS[op].reduceat(x, starts).astype(x.dtype, copy=False)


def merge_groups(ops: dict, a: dict, b: dict) -> dict:
    """Two partial group tables (dicts: the key columns first, then one column per name in
    `ops`, the name's op) merged into one (the module doc)."""
    names = list(a)
    nk = len(names) - len(ops)
    cols = {nm: np.concatenate([a[nm], b[nm]]) for nm in names}
    if not len(cols[names[0]]):
        return cols
    # stable; NumPy orders floats as order_keys does: NaN last, -0.0 == 0.0
    order = np.lexsort([cols[nm] for nm in names[:nk]][::-1])
    keys = [cols[nm][order] for nm in names[:nk]]
    new = np.zeros(len(order), dtype=bool)
    new[0] = True
    for k in keys:
        same = k[1:] == k[:-1]
        if k.dtype.kind == "f":
            same |= np.isnan(k[1:]) & np.isnan(k[:-1])
        new[1:] |= ~same
    starts = np.flatnonzero(new)
    out = {nm: k[starts] for nm, k in zip(names[:nk], keys)}
    for nm in names[nk:]:
        out[nm] = segments(ops[nm], cols[nm][order], starts)
    return out
