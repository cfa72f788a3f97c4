"""group_by on the cpu backend (CpuStages.group_by): group ids by per-chunk hash tables when
there are few groups, a stable radix sort otherwise; the aggregates in a generated module.

    1. one exact word per row: the key's order bits (one key, read in place) or the keys'
       bits packed side by side (the stage kernels' `pack`, when they fit 64 bits) in the
       narrowest unsigned type that holds them (Q1's two uint8 flags: a uint16); integer
       keys wider together (Q20's two int64 ids) packed by their values' ranges when those
       fit 64 bits (cpu_join.range_packed_one: a min/max per field).
    2. low cardinality (<= GROUP_TABLE_MAX = 4096 groups; TPC-H's Q1 has 4, Q12 2):
       ops/group/cpu_kernels.py gives each row a chunk-local group id (group_local_ids, by
       morsels) and each chunk's local groups their sorted position (group_merge_ids, once:
       exact integers), counts and first rows; the generated `low_chunks` step folds every
       aggregate into per-chunk private tables (by morsels) and `merge` merges them chunk
       by chunk. Any chunk or the whole input with more groups gives up
       (after at most one pass) and takes step 3.
    3. any cardinality (or key tuples wider than 64 bits): the stage runtime's stable radix
       sort of the keys (each group's rows stay in source order; a one-word key already in
       ascending order, found by the pass that finds its run starts, is not sorted), run
       starts where a key's order bits change (sorted_breaks_chunks / breaks_chunks), and
       the generated `seg_blocks` step over blocks of groups (by morsels).
The group keys are the keys of each group's first row (step 2's first rows, or the sort's:
its first row per run), `first` gathers the values there, `count` is exact.

Float results do not depend on the path, the thread count or the morsels: both paths fold a
group's rows per SOURCE chunk of CHUNK rows in source order and the chunk partials in chunk
order (ops/group/cpu.py). Compared with the reference
(np.add.reduceat over the sorted rows) a float sum differs only by rounding: within
(rows in the group) * eps * sum of |values| (tests use a tolerance of that order).
"""
from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np

from querycompute._codegen.dialects.numba_py import CHUNK, storage_dtype
from querycompute._codegen.ops.group import cpu as numba_group
from querycompute._codegen.order_keys import numba_consts as _consts, raw_bits as _raw
from querycompute._codegen.ir.stage_specs import SortSpec

from .cpu import param_args
from .cpu_join import range_packed_one
from .morsels import chunks as _chunks
from .numba_loader import load, stage_kernels_source
from ...artifacts import ArtifactCache

GROUP_TABLE_MAX = 4096              # the low-cardinality path's limit (local ids are uint16)


def kernels_source() -> str:
    """The stage kernels' text with ops/group/cpu_kernels.py's appended (it uses order_bits)."""
    return stage_kernels_source("group/cpu_kernels.py")


def kernels():
    """The generic group kernels' module (one text for every query: compiled once per
    machine, then loaded from the disk cache)."""
    return load("qc_group_kernels", kernels_source(), native=True)


# The first lines of a generated module that calls the generic group kernels (the fused
# group_by's): their module's names as globals, so numba links their compiled code (loaded
# from the disk cache) instead of compiling the same functions again in every query's module.
# The kernels' text's hash is part of the text (uses_kernels): numba's cached code of such a
# module names the kernels' module it linked, so a changed kernel text must change its key too
# (else the old entry loads and fails: "No module named querycompute_kernels_<old hash>").
USES_KERNELS = ("from querycompute.backends.cpu.cpu_group import kernels as _qc_kernels\n"
                "globals().update({k: v for k, v in _qc_kernels().numba_ns().items() if not k.startswith('__')})\n")


@lru_cache(maxsize=1)
def uses_kernels() -> str:
    """USES_KERNELS after a comment naming the group kernels' text by its hash."""
    digest = hashlib.sha256(kernels_source().encode()).hexdigest()[:16]
    return f"# links the group kernels' text {digest}\n" + USES_KERNELS


def not_run(nch: int) -> np.ndarray:
    """Local group counts per chunk before any chunk ran: -2 (a chunk past the limit writes
    -1; either is below zero, which the merge reads as "gave up")."""
    return np.full(nch, -2, np.int64)


def gave_up(nloc: np.ndarray):
    """The morsels' stop test of a step writing `nloc` (not_run): a chunk went past the
    limit, so the whole table gives up and the chunks left need not run (morsels.py)."""
    return lambda: bool((nloc == -1).any())


class CpuGroupBy:
    """The group_by of one CpuStages (its modules are loaded once per instance)."""

    def __init__(self, stages):
        self.stages = stages
        self.limit = GROUP_TABLE_MAX
        self._mod = None
        self._aggs = ArtifactCache("cpu: group_by kernels")

    def _kernels(self):
        if self._mod is None:
            self._mod = kernels()
            assert self._mod.ns["CHUNK"] == CHUNK        # one chunk rule for ids and folds
        return self._mod

    def agg_module(self, spec):
        """The module of spec's aggregates (ops/group/cpu.py: one text per aggregates and
        params, whatever the query; its functions numba_group.NAME_<step>)."""
        key = (spec.aggs, spec.params)
        mod = self._aggs.get(key)
        if mod is None:
            mod = self._aggs.put(key, load(numba_group.NAME, numba_group.render(spec, cache=True), native=True))
        return mod

    def __call__(self, spec, keys, values, params, rows):
        st = self.stages
        keys = [np.ascontiguousarray(k) for k in keys]
        n = len(keys[0])
        if n == 0:
            return ([k[:0].copy() for k in keys], [np.zeros(0, a.dtype) for a in spec.aggs],
                    np.zeros(0, np.int64))
        ks = numba_group.accumulating(spec)
        vals = [np.ascontiguousarray(values[k], dtype=spec.aggs[k].dtype) for k in ks]
        vals = [v.view(storage_dtype(str(v.dtype))) for v in vals]
        ps = param_args(spec.params, params)
        word = None                     # the key column whose order bits are the word
        if len(keys) == 1:
            word = keys[0]
        elif sum(k.dtype.itemsize for k in keys) <= 8:
            word = self._pack(keys, rows, f"{spec.name}_")
        elif all(k.dtype.kind in "biu" for k in keys):
            # integer fields wider together than 64 bits (two int64 ids): packed by their
            # values' ranges when those fit one word (the join's rule, cpu_join.range_packed:
            # ordered and equal as the tuple), else the sort of the columns below
            word = range_packed_one(keys)
        ids = None
        if word is not None and 0 < self.limit <= 65536 and not numba_group.in_order(spec):
            ok, lid, nloc, remap, first, counts = self._group_ids(word, n, rows, f"{spec.name}_")
            ids = (lid, nloc, remap) if ok else None
        if ids is None:
            perm, starts = self._sorted_runs(spec, keys, word, rows)
            first, counts = (starts[:-1] if perm is None else perm[starts[:-1]]), np.diff(starts)
        accs = ()
        if ks:
            mod = self.agg_module(spec)
            name, label = numba_group.NAME, f"{spec.name}_"
            if ids is not None:           # per-chunk partials by morsels, merged in chunk order
                lid, nloc, remap = ids
                parts = st._call(mod, f"{name}_low_alloc", rows, label, len(nloc), remap.shape[1])
                st._morsels(mod, f"{name}_low_chunks", len(nloc), rows, label, lid, nloc, *parts, *vals, *ps)
                accs = st._call(mod, f"{name}_merge", rows, label, nloc, remap, len(first), *parts, *ps)
            else:                         # blocks of SEG_BLOCK groups by morsels
                if perm is None:          # keys in order: the rows themselves, in order
                    perm = np.arange(n, dtype=np.int64)
                accs = st._call(mod, f"{name}_seg_alloc", rows, label, len(starts) - 1)
                blocks = -(-(len(starts) - 1) // mod.ns["SEG_BLOCK"])
                st._morsels(mod, f"{name}_seg_blocks", blocks, rows, label, perm, starts, *accs, *vals, *ps)
        group_keys = st.gather(keys, first, rows)
        out, acc = [], dict(zip(ks, accs))
        for k, a in enumerate(spec.aggs):
            if a.op == "count":
                out.append(counts.copy())
            elif a.op == "first":
                out.append(st.gather([np.asarray(values[k], dtype=a.dtype)], first, rows)[0])
            else:
                out.append(acc[k].astype(a.dtype, copy=False))
        return group_keys, out, counts

    def _group_ids(self, word, n, rows, label) -> tuple:
        """(ok, local ids, local groups per chunk, remap, first row, count per group): the
        chunks' local tables by morsels, then their merge (ops/group/cpu_kernels.py)."""
        mod, nch, limit = self._kernels(), _chunks(n), self.limit
        lid = np.empty(n, np.uint16)
        words = np.empty((nch, limit), np.uint64)
        first = np.empty((nch, limit), np.int64)
        cnt = np.empty((nch, mod.ns["CNT_WAYS"] * limit), np.int64)
        nloc = not_run(nch)
        st = self.stages
        st._morsels(mod, "group_local_ids", nch, rows, label, n, _raw(word), limit, lid, words,
                    first, cnt, nloc, *_consts(word.dtype), stop=gave_up(nloc))
        ok, remap, gfirst, gcnt = st._call(mod, "group_merge_ids", rows, label, words, first,
                                           cnt, nloc, limit)
        return ok, lid, nloc, remap, gfirst, gcnt

    def _pack(self, keys, rows, label) -> np.ndarray:
        """The keys' order bits side by side in the narrowest unsigned word that holds them
        all (the first key highest: the word orders and equals as the tuple)."""
        total = sum(k.dtype.itemsize for k in keys)
        w = np.zeros(len(keys[0]), f"u{next(b for b in (1, 2, 4, 8) if b >= total)}")
        return self.stages._pack((False,) * len(keys), keys, rows, label, w)

    def _sorted_runs(self, spec, keys, word, rows):
        """(stable sort permutation, run starts with n appended): step 3. The permutation is
        None when the key is already in order (the identity: made only if an aggregate reads
        rows through it; a count or first needs only the run starts)."""
        st = self.stages
        n = len(keys[0])
        new = np.zeros(n, dtype=bool)
        new[0] = True
        if word is not None and self._sorted_breaks(_raw(word), new, _consts(word.dtype), rows,
                                                    f"{spec.name}_"):
            perm = None                # in order: the stable sort is the identity
        elif word is not None:         # one word: sort it, breaks on the sorted words
            new[1:] = False
            sorted_u, perm = st._radix(word, False, None, rows, f"{spec.name}_")
            self._breaks(sorted_u, new, _consts(word.dtype), rows, f"{spec.name}_")
        else:
            sspec = SortSpec(spec.key_dtypes, (False,) * len(keys), spec.name)
            perm = st._full_sort(sspec, keys, rows)
            for k in keys:
                s = st.gather([k], perm, rows)[0]
                self._breaks(_raw(s), new, _consts(s.dtype), rows, f"{spec.name}_")
        starts = np.append(np.flatnonzero(new), n).astype(np.int64)
        return perm, starts

    def _sorted_breaks(self, u, new, consts, rows, label) -> bool:
        """Whether u is already in ascending order bits, its run starts in `new` if so: one
        read (ops/group/cpu_kernels.sorted_breaks_chunks); out of order, the chunks left stop
        after the first that finds it (morsels.py)."""
        bad = np.zeros(_chunks(len(u)), np.bool_)
        self.stages._morsels(self._kernels(), "sorted_breaks_chunks", len(bad), rows, label,
                             len(u), u, new, bad, *consts, stop=bad.any)
        return not bad.any()

    def _breaks(self, u, new, consts, rows, label) -> None:
        self.stages._morsels(self._kernels(), "breaks_chunks", _chunks(len(u)), rows, label,
                             len(u), u, new, *consts)
