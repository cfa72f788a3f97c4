"""The host's joins by key: the reference every runtime's join equals (the numpy backend runs
it; the cpu hash join, backends/cpu/cpu_join.py, and the device join, ops/join/gpu.py,
give its pairs exactly), and left_join's fill values.

    key_ids         one integer per row of both sides, equal exactly where the keys are: the
                    order bits (_codegen/order_keys.py) of the keys in their common type (all
                    NaNs one value, -0.0 == 0.0); several key columns: one id per distinct tuple
    join_reference  (left, right) index pairs in LINQ's order: left order, then right order
                    among a left row's matches (a stable sort of the right ids, two binary
                    searches per left row); `outer`: an unmatched left row once, right -1
    semi_reference  a flag per left row: its key occurs on the right (intersect_by / except_by)
    gather_filled   col[idx], idx -1 -> the dtype's fill value (NaN / 0 / False)
"""
from __future__ import annotations

import numpy as np

from querycompute._codegen import order_keys


def join_reference(left_keys, right_keys, outer: bool) -> tuple:
    """(left indexes, right indexes) of the matching pairs in LINQ's order: left order, then
    right order among a left row's matches; `outer`: a left row without a match once, with
    right index -1. Keys are compared as order bits of their common type."""
    nl, nr = len(left_keys[0]), len(right_keys[0])
    lid, rid = key_ids(left_keys, right_keys)
    order = np.argsort(rid, kind="stable")
    sr = rid[order]
    lo = np.searchsorted(sr, lid, "left")
    counts = np.searchsorted(sr, lid, "right") - lo
    take = np.maximum(counts, 1) if outer else counts
    li = np.repeat(np.arange(nl, dtype=np.int64), take)
    starts = np.repeat(lo, take)
    offs = np.arange(len(li), dtype=np.int64) - np.repeat(np.cumsum(take) - take, take)
    ri = order[np.minimum(starts + offs, max(nr - 1, 0))].astype(np.int64) if nr else np.zeros(len(li), np.int64)
    if outer:
        ri[np.repeat(counts == 0, take)] = -1
    return li, ri


def semi_reference(left_keys, right_keys) -> np.ndarray:
    """bool per left row: its key occurs among the right keys (join_reference's equality)."""
    lid, rid = key_ids(left_keys, right_keys)
    sr = np.sort(rid)
    pos = np.minimum(np.searchsorted(sr, lid), max(len(sr) - 1, 0))
    return sr[pos] == lid if len(sr) else np.zeros(len(lid), dtype=bool)


def key_ids(left_keys, right_keys) -> tuple:
    """(left ids, right ids): one integer per row, equal exactly where the keys are: order
    bits of both sides' common type (all NaNs one value, -0.0 == 0.0); several key columns:
    one id per distinct tuple."""
    nl, nr = len(left_keys[0]), len(right_keys[0])
    lb, rb = [], []
    for a, b in zip(left_keys, right_keys):
        common = np.promote_types(np.asarray(a).dtype, np.asarray(b).dtype)
        lb.append(order_keys.transform(np.asarray(a).astype(common)).astype(np.uint64))
        rb.append(order_keys.transform(np.asarray(b).astype(common)).astype(np.uint64))
    if len(lb) == 1:
        lid, rid = lb[0], rb[0]
    else:                              # several key columns: one id per distinct tuple
        both = np.concatenate([np.stack(lb, axis=1), np.stack(rb, axis=1)]) if nl + nr else np.zeros((0, len(lb)))
        _, ids = np.unique(both, axis=0, return_inverse=True)
        ids = ids.reshape(-1)
        lid, rid = ids[:nl], ids[nl:]
    return lid, rid


def fill_value(dtype) -> object:
    dt = np.dtype(dtype)
    return np.nan if dt.kind == "f" else (False if dt.kind == "b" else 0)


def gather_filled(col: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """col[idx] with idx -1 giving the dtype's fill value (left_join's rows without a match)."""
    if len(col) == 0:
        return np.full(len(idx), fill_value(col.dtype), dtype=col.dtype)
    out = col[np.maximum(idx, 0)]
    missing = idx < 0
    if missing.any():
        out[missing] = fill_value(col.dtype)
    return out
