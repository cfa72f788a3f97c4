"""GpuStages.join and gather_filled: the hash join of ops/join/gpu.py on the device
(opencl, cuda; CUDA C and MSL through the CPU harness), returning the index pairs of
ops/join/reference.join_reference exactly (LINQ's order: left order, then right order among a left
row's matches; left_join: an unmatched left row once, with right index -1).

    1. both sides' keys hashed (qc_join_hash: order bits in the common type, packed into one
       32-bit word when they fit, else 64-bit, times an odd constant); host key columns (the other query's) go to the device once;
    2. the build side: inner joins build on the smaller side (ties: the right), left_join
       always on the right (its unmatched left rows then come straight from the probe's
       counts); its h sorted by the radix sort with the row as payload (GpuStages.sort) and
       gathered, bucket starts by binary search (qc_join_starts);
    3. the probe: per probe row the count and first row of its run (qc_join_count), an
       inclusive scan of the counts (GpuStages.scan), the pair count read back (8 bytes: it
       sizes the pairs), one thread per pair writing (probe row, build row) (qc_join_pairs);
    4. built on the right, the pairs are in LINQ's order; built on the left, they come by
       right row and a stable radix sort of the pairs by left row (GpuStages.sort, gathers)
       restores left order, keeping the right order among a left row's matches.
`member` (GpuStages.semi_join: intersect_by / except_by) runs steps 1-3 built on the right up to
the counts, then one flag per left row (a gather of an all-True column by each row's first
match, False where none): no pairs. Results stay where the inputs are: device columns (index dtype int32 below 2**31 rows) when
either side is on the device, else int64 host arrays. Keys the device can't hash
(join_gpu.device_keys: wider than 64 bits together, a float conversion) and a dialect without
64-bit integers (join_gpu.without_join: webgpu) run the host reference; its trace row says so
(dialect "numpy").
"""
from __future__ import annotations

import math

import numpy as np

from querycompute._codegen.ir import expr as E
from querycompute._codegen.ops.join import gpu as J
from querycompute._codegen.ir.stage_specs import ScanSpec, SortSpec

from . import device_columns as DC
from .gpu_stages import _bits, _device, index_dtype
from ..._codegen.ops.join.reference import gather_filled as host_gather
from ..stage_runtime import NumpyStages

_ACC, _ITEM = E.Var("acc", "int64"), E.Var("item", "int64")
OFFSETS = ScanSpec("int64", E.Binary("add", _ACC, _ITEM, "int64"), E.Const(0, "int64"), (), "qc_join_offsets")


def build_sort(hash_dtype: str) -> SortSpec:
    return SortSpec((hash_dtype,), (False,), "qc_join_build")


def by_left_sort(index_dtype: str) -> SortSpec:
    return SortSpec((index_dtype,), (False,), "qc_join_by_left")


def common_dtypes(left_keys, right_keys) -> tuple[str, ...]:
    return tuple(str(np.promote_types(a.dtype, b.dtype)) for a, b in zip(left_keys, right_keys))


def device_reason(stages, left_keys, right_keys) -> str | None:
    """Why this join runs the host reference on `stages` (None: it runs on the device)."""
    return dtype_reason(stages.dialect, tuple(str(k.dtype) for k in left_keys),
                        tuple(str(k.dtype) for k in right_keys))


def dtype_reason(dialect: str, left_dtypes: tuple, right_dtypes: tuple) -> str | None:
    """device_reason from the key dtypes alone (what explain() knows): the one rule."""
    why = J.without_join(dialect)
    if why is not None:
        return why
    common = tuple(str(np.promote_types(a, b)) for a, b in zip(left_dtypes, right_dtypes))
    return J.device_keys(tuple(left_dtypes), common) or J.device_keys(tuple(right_dtypes), common)


def join(stages, left_keys, right_keys, outer: bool, rows: list) -> tuple:
    """GpuStages.join: (li, ri) as the module docstring says."""
    if device_reason(stages, left_keys, right_keys):
        return NumpyStages.join(stages, [DC.to_host(k) for k in left_keys],
                                [DC.to_host(k) for k in right_keys], outer, rows)
    nl, nr = len(left_keys[0]), len(right_keys[0])
    keep = _device(list(left_keys) + list(right_keys))
    if nl == 0 or nr == 0:
        li = np.arange(nl, dtype=np.int64) if outer else np.zeros(0, np.int64)
        return li, np.full(len(li), -1, np.int64)
    if keep:                         # the other side's host keys go over once
        left_keys, right_keys = stages.to_device(left_keys), stages.to_device(right_keys)
    idx = index_dtype(max(nl, nr))
    build_right = outer or nr <= nl
    cnt, lo, perm, p, hd = _counts(stages, left_keys, right_keys, build_right, outer, idx, rows, keep)
    incl = stages.scan(OFFSETS, cnt, (), rows)
    total = int(DC.to_host(incl[p - 1:p])[0])          # the pairs' count sizes the pairs
    if total == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty.copy()
    probe, build = stages._run(("join_pairs", idx, hd), lambda: J.render_probe(stages.dialect, idx, hd)["pairs"],
                               [incl, cnt, lo, DC.contiguous(perm, dtype=idx)], [p], total, rows, keep)
    if build_right:
        li, ri = probe, build
    else:                            # by right row: a stable sort by left row restores LINQ's order
        order = stages.sort(by_left_sort(idx), [build], None, rows)
        li, ri = stages.gather([build, probe], order, rows)
    if keep:
        return li, ri
    return np.asarray(li, np.int64), np.asarray(ri, np.int64)


def _counts(stages, left_keys, right_keys, build_right: bool, outer: bool, idx: str, rows: list, keep: bool):
    """Steps 1-3 up to the counts (module doc): (cnt, lo, the build side's sort permutation,
    probe rows, the hash's dtype); cnt / lo per probe row: its matches and its first sorted
    build row (-1: none)."""
    common = common_dtypes(left_keys, right_keys)
    hd = J.hash_dtype(common)

    def hashed(keys):
        own = tuple(str(k.dtype) for k in keys)
        name = "qc_join_hash_" + "_".join(own) + ("_as_" + "_".join(common) if own != common else "")
        return stages._run(("join_hash", own, common), lambda: J.render_hash(own, common, stages.dialect, name),
                           [_bits(k) for k in keys], [], len(keys[0]), rows, keep)[0]

    hb, hp = hashed(right_keys), hashed(left_keys)
    if not build_right:
        hb, hp = hp, hb
    m, p = len(hb), len(hp)
    perm = stages.sort(build_sort(hd), [hb], None, rows)
    hs = stages.gather([hb], perm, rows)[0]
    tbits = min(max(1, math.ceil(math.log2(m))), J.HASH_BITS[hd] - 1)     # ~1 build row per bucket
    shift = J.HASH_BITS[hd] - tbits
    probe_sets = lambda: J.render_probe(stages.dialect, idx, hd)  # noqa: E731  (one program)
    starts = stages._run(("join_starts", idx, hd), lambda: probe_sets()["starts"],
                         [hs], [m, shift], (1 << tbits) + 1, rows, keep)[0]
    cnt, lo = stages._run(("join_count", idx, hd), lambda: probe_sets()["count"],
                          [hp, hs, starts], [shift, int(outer)], p, rows, keep)
    return cnt, lo, perm, p, hd


def member(stages, left_keys, right_keys, rows: list):
    """GpuStages.semi_join: the join's steps 1-3 built on the right (the other side) up to
    the counts, then a flag per left row: an all-True column gathered by `lo` with the
    fill False (render_gather_filled: True where the row has a match); nothing is paired.
    The join's host reference where it takes it (device_reason)."""
    if device_reason(stages, left_keys, right_keys):
        return NumpyStages.semi_join(stages, [DC.to_host(k) for k in left_keys],
                                     [DC.to_host(k) for k in right_keys], rows)
    nl, nr = len(left_keys[0]), len(right_keys[0])
    if nl == 0 or nr == 0:
        return np.zeros(nl, dtype=bool)
    keep = _device(list(left_keys) + list(right_keys))
    if keep:
        left_keys, right_keys = stages.to_device(left_keys), stages.to_device(right_keys)
    _, lo, _, _, _ = _counts(stages, left_keys, right_keys, True, False, index_dtype(max(nl, nr)), rows, keep)
    return gather_filled(stages, [np.ones(nr, dtype=bool)], lo, rows, idx_dtype="int64")[0]


def gather_filled(stages, cols, idx, rows: list, idx_dtype: str | None = None) -> list:
    """[col[idx] with idx -1 giving the dtype's fill value (NaN / 0 / False)] on the device
    (ops/join/reference.gather_filled's kernel: ops/join_gpu.render_gather_filled);
    `idx_dtype`: idx's dtype where it is not that of the columns' length (the count kernel's int64 lo)."""
    if not cols:
        return []
    m = len(idx)
    if not stages.caps.device_join or m == 0 or any(len(c) == 0 for c in cols):
        return [host_gather(DC.to_host(c), DC.to_host(idx)) for c in cols]
    keep = _device(list(cols) + [idx])
    if keep:
        cols = stages.to_device(cols)
    dtypes = tuple(str(c.dtype) for c in cols)
    it = idx_dtype or index_dtype(max(len(c) for c in cols))
    if DC.on_device(idx) and idx.dtype != np.dtype(it):
        idx = DC.to_host(idx)
    raw = stages._run(("join_gather_filled", dtypes, it), lambda: J.render_gather_filled(dtypes, stages.dialect, it),
                      [_bits(c) for c in cols] + [DC.contiguous(idx, dtype=it)], [], m, rows, keep)
    return [r.view(c.dtype) for r, c in zip(raw, cols)]


def explain_lines(this_dtypes, key_dtypes, dialect: str, semi: bool = False) -> list[str]:
    """The join's kernels and bytes per row, for explain() on a GPU backend (this side's key
    dtypes `this_dtypes`, the other's `key_dtypes`); the host reference where `join` takes it.
    `semi`: intersect_by / except_by (`member`)."""
    why = dtype_reason(dialect, tuple(str(d) for d in this_dtypes), tuple(str(d) for d in key_dtypes))
    if why:
        ref = "semi_reference" if semi else "join_reference"
        return [f"{'semi-join' if semi else 'join'}: the numpy reference on the host (join_plan.{ref}; "
                f"no device kernels): {why}"]
    if semi:
        rows = J.bytes_per_row(tuple(key_dtypes))
        return (["semi-join: the device hash join's build on the other side and its count kernel; a "
                 "flag per row = an all-True column gathered by the first match (qc_join_gather_filled, "
                 "False where none); no pairs"]
                + [f"  {step}: {b} B" for step, b in rows
                   if not any(w in step for w in ("offsets", "pairs", "by_left"))])
    lines = ["join: device hash join (ops/join/gpu.py): inner joins build on the smaller side "
             "(left_join on the right); built on the left, a stable radix sort of the pairs by left "
             "row restores LINQ's order"]
    lines += [f"  {step}: {b} B" for step, b in J.bytes_per_row(tuple(key_dtypes))]
    return lines

