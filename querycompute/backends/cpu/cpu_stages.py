"""The cpu backend's column operations between fused passes (StageRuntime "cpu"): numba
kernels over fixed chunks, equal to stage_runtime.NumpyStages bit for bit (a float scan
groups its combines differently, deterministically for a given n). Every operation runs
as steps over ranges of chunks through the morsel scheduler (`_morsels`: one call on this
thread for a small input), the small sequential work between steps (offsets, carries, a
join's build, a group table's merge) as one call (`_call`) or in NumPy here; the kernels are
the ops' CPU lowerings (ops/sort/cpu_kernels.py, ops/scan/cpu.py, ops/group/,
ops/join/cpu_kernels.py). No prange, no serial twin.

    sort             LSD radix sort per key column, the LAST key first (each pass is stable,
                     so earlier keys decide and ties keep index order); a later key column
                     is gathered into the current order first. Payload: the int64
                     permutation. (ops/sort/cpu_kernels.py explains the passes.)
    sort with k      top-k: per-chunk heaps of the k smallest (bits, index) -> candidates
                     (at most chunks x k), sorted by the full sort above in index order, so
                     ties go by index. Several keys are packed into one uint64 word first;
                     keys wider than 64 bits together pack their first 64 bits, and every
                     row whose word is not above the k-th smallest is a candidate. A k near
                     n takes the full sort.
    sort_values      the radix sort of the key's raw bits alone (no permutation).
    gather           parallel over chunks of the permutation, on the columns' raw bits.
    scan             a generated module per ScanSpec (ops/scan/cpu.py): chunk totals by
                     morsels, the carries, each chunk from its carry by morsels.
    scan_carries     the scan's first phase alone, for a pass fused after the scan.
    first_occurrence hash partitions + per-partition hash sets on the keys' order bits
                     (one uint64 word, or two: whole key columns packed into each; wider
                     key tuples: the sort and run starts).
    group_by         per-chunk hash tables of group ids (<= 4096 groups) or the radix sort,
                     then a generated module of the aggregates (cpu_group.py).
    join             hash join on the smaller side, parallel probe (cpu_join.py).
    semi_join        the join's hash table of the other side, a flag per row (cpu_join.py).
    fused_group      the pass before a group_by and the aggregates in one pass, per-chunk
                     private tables (<= 4096 groups; cpu_group_fused.py), else None.
A small input runs as one call on the caller's thread, which computes exactly what the
morsels do. numba is imported on first use, never on import.
"""
from __future__ import annotations

import numpy as np

from querycompute._codegen import order_keys
from querycompute._codegen.ops.scan import cpu as numba_scan
from querycompute._codegen.ops.scan import fused_cpu as numba_scan_fused
from querycompute._codegen.dialects.numba_py import CHUNK, storage_dtype

from . import cpu as _cpu
from .cpu import param_args
from ..base import KernelRun
from ...artifacts import ArtifactCache
from .cpu_join import CpuJoin, key_types, reference_reason
from .morsels import chunks as _chunks
from .numba_loader import load, stage_kernels_source
from ..stage_runtime import StageCaps, StageRuntime

_NO_IDX = np.empty(0, np.int64)
_NO_WORDS = np.empty(0, np.uint64)     # distinct's second key words, for one-word keys
_consts = order_keys.numba_consts          # (kind, sign, ones, inf): what order_bits takes
_raw = order_keys.raw_bits


def key_words(dtypes) -> tuple | None:
    """The key columns of each 64-bit word of distinct's hash-set key: one word when they
    fit together (their order bits side by side), else two, each of whole columns in
    order (a (group key, value) pair of 64-bit values: a per-group distinct count); None
    when they don't fit two: the sort (first_occurrence runs it, explain() prints it)."""
    sizes = [np.dtype(d).itemsize for d in dtypes]
    words: list = [[]]
    room = 8
    for j, size in enumerate(sizes):
        if size > room:
            words.append([])
            room = 8
        words[-1].append(j)
        room -= size
    return tuple(tuple(w) for w in words) if len(words) <= 2 else None


class CpuStages(StageRuntime):
    name = "cpu"
    # a join's next pass reads through the pairs (numba_indexed.py); a scan fuses into the
    # next pass through its carries; a pass and the group_by after it run as one pass
    caps = StageCaps(indexed_passes=True, scan_carries=True, fused_group=True)

    def __init__(self):
        self._scans = ArtifactCache("cpu: scan kernels")
        self._mod = None
        self._group = None
        self._fused = None
        self._join = None

    # ---- plumbing -----------------------------------------------------------------------
    def _kernels(self):
        """The fixed kernels' module (ops/sort/cpu_kernels.py), loaded once."""
        mod = self._mod
        if mod is None:
            mod = self._mod = load("qc_stage_kernels", stage_kernels_source(), native=True)
        return mod

    def _call(self, mod, fn: str, rows: list, prefix: str, *args):
        """Entry point `fn`(*args) of `mod` once on this thread (a serial step: a join's
        build); its trace row is named prefix + fn."""
        out, cache, compile_ms, ms = mod.call(fn, *args)
        rows.append(KernelRun(prefix + fn, "numba", (1,), (1,), cache, compile_ms, ms))
        return out

    def _morsels(self, mod, fn: str, nch: int, rows: list, prefix: str, *args, stop=None):
        """Entry point `fn`(c0, c1, *args) of `mod` over chunks [0, nch) through the morsel
        scheduler (cpu._run_morsels: one call here for a small nch; `stop`: a step that may
        give up skips its morsels left once it holds, morsels.py); its trace row is named
        prefix + fn + _inline / _morsels."""
        _, cache, compile_ms, ms = mod.call(fn, runner=lambda entry: _cpu._run_morsels(entry, nch, args, stop))
        kind = "inline" if _cpu._in_morsels(nch) == 1 else "morsels"
        rows.append(KernelRun(f"{prefix}{fn}_{kind}", "numba", (max(1, nch),), (CHUNK,), cache, compile_ms, ms))

    # ---- sort ---------------------------------------------------------------------------
    def _radix(self, x, desc: bool, idx, rows, label):
        """(sorted raw bits of key x, payload): idx None starts the permutation, else it
        rides along; mode 0 (no payload) when idx is False. The LSD radix sort of
        ops/sort/cpu_kernels.py, its steps run by morsels, the offsets between them here."""
        u = _raw(x)
        n, nb = len(u), u.dtype.itemsize
        mode = 0 if idx is False else (1 if idx is None else 2)
        src_idx = idx if mode == 2 else _NO_IDX
        kind, sign, ones, inf = _consts(x.dtype)
        mod, nch = self._kernels(), _chunks(n)
        if nch == 1:                            # one chunk: one call on this thread
            return self._call(mod, "radix_one", rows, label, u, src_idx, mode, kind, desc, sign,
                              ones, inf)
        radix = mod.ns["RADIX"]                 # 256: 8-bit digits
        hc = np.zeros((nch, nb, radix), np.int64)
        self._morsels(mod, "radix_counts", nch, rows, label, n, u, hc, kind, desc, sign, ones, inf)
        active = [b for b in range(nb) if hc[:, b].sum(axis=0).max() < n]   # digits that vary
        if not active:
            return u.copy(), (np.arange(n, dtype=np.int64) if mode == 1 else src_idx.copy())
        src, sidx = u, src_idx
        bufs = (np.empty_like(u), np.empty_like(u))
        ibufs = (np.empty(n if mode else 0, np.int64), np.empty(n if mode else 0, np.int64))
        for k, b in enumerate(active):
            shift = np.uint64(8 * b)
            if k == 0:                          # keys still in input order: step 1's counts
                hd = np.ascontiguousarray(hc[:, b])
            else:
                hd = np.empty((nch, radix), np.int64)
                self._morsels(mod, "radix_digit_counts", nch, rows, label, n, src, hd, shift,
                              kind, desc, sign, ones, inf)
            # offsets in (digit, chunk) order: the elements of smaller digits, then those of
            # this digit in earlier chunks
            total = hd.sum(axis=0)
            off = (np.cumsum(total) - total)[None, :] + (np.cumsum(hd, axis=0) - hd)
            dst, didx = bufs[k % 2], ibufs[k % 2]
            self._morsels(mod, "radix_scatter", nch, rows, label, n, src, sidx, off, shift, dst,
                          didx, mode, kind, desc, sign, ones, inf)
            src, sidx = dst, didx
            mode = 2 if mode else 0
        return src, sidx

    def _full_sort(self, spec, keys, rows) -> np.ndarray:
        perm = None
        for j in range(len(keys) - 1, -1, -1):          # LSD over keys: the last one first
            col = keys[j] if perm is None else self.gather([keys[j]], perm, rows)[0]
            _, perm = self._radix(col, bool(spec.descending[j]), perm, rows, f"{spec.name}_key{j}_")
        return perm

    def sort(self, spec, keys, k, rows):
        keys = [np.ascontiguousarray(c) for c in keys]
        n = len(keys[0])
        if k is not None and k <= 0 or n == 0:
            return np.zeros(0, np.int64)
        nch = _chunks(n)
        if k is None or 4 * k * nch > n:                 # k near n: a heap per chunk loses
            perm = self._full_sort(spec, keys, rows)
            return perm if k is None else perm[:k]
        mod = self._kernels()
        if len(keys) == 1:
            u, desc = _raw(keys[0]), bool(spec.descending[0])
            kind, sign, ones, inf = _consts(keys[0].dtype)
        else:
            u, desc = self._pack(spec.descending, keys, rows, f"{spec.name}_"), False
            kind, sign, ones, inf = _consts(np.dtype(np.uint64))
        cand = self._topk(mod, u, k, (kind, desc, sign, ones, inf), rows, f"{spec.name}_")
        if sum(c.dtype.itemsize for c in keys) > 8:
            # u holds the tuple's first 64 bits only: the top k by (word, index) fix the k-th
            # smallest word, and every row whose word is not above it is a candidate (rows
            # sharing that word are ordered by the later bits)
            bound = np.partition(u[cand], k - 1)[k - 1]
            cand = self._select_le(mod, u, bound, rows, f"{spec.name}_")
        cand.sort()                                      # index order: ties by index below
        sub = [c[cand] for c in keys]
        return cand[self._full_sort(spec, sub, rows)[:k]]

    def _topk(self, mod, u, k, consts, rows, label) -> np.ndarray:
        """Candidate indices (in chunk order) holding the top k of u: chunk 0's heap first
        (its k-th key bounds the rest), then every other chunk's by morsels."""
        n, nch = len(u), _chunks(len(u))
        ht, hi_ = np.empty((nch, k), np.uint64), np.empty((nch, k), np.int64)
        cnt = np.zeros(nch, np.int64)
        ones = consts[3]
        self._morsels(mod, "topk_chunks", 1, rows, label, 0, n, u, k, ht, hi_, cnt, ones, *consts)
        bound = ht[0, 0] if cnt[0] == k else ones
        if nch > 1:
            self._morsels(mod, "topk_chunks", nch - 1, rows, label, 1, n, u, k, ht, hi_, cnt,
                          bound, *consts)
        return hi_[np.arange(k)[None, :] < cnt[:, None]]      # row-major: chunk order

    def _select_le(self, mod, w, bound, rows, label) -> np.ndarray:
        """Indices (ascending) of the words <= bound: per-chunk counts, then each chunk
        writes at its offset."""
        n, nch = len(w), _chunks(len(w))
        cnt = np.zeros(nch + 1, np.int64)
        self._morsels(mod, "select_le_counts", nch, rows, label, n, w, bound, cnt)
        off = np.cumsum(cnt)
        out = np.empty(int(off[-1]), np.int64)
        self._morsels(mod, "select_le_write", nch, rows, label, n, w, bound, off, out)
        return out

    def _pack(self, descending, keys, rows, label, w=None) -> np.ndarray:
        """One word per row (uint64 unless `w` is given): the keys' order bits side by side,
        the first key highest, so the word orders (and equals) as the key tuple; a tuple
        wider than the word keeps its first bits (which order the rows but may tie)."""
        w = np.zeros(len(keys[0]), np.uint64) if w is None else w
        room = 8 * w.dtype.itemsize
        for c, desc in zip(keys, descending):
            if room == 0:
                break
            width = 8 * c.dtype.itemsize
            take = min(width, room)
            room -= take
            kind, sign, ones, inf = _consts(c.dtype)
            self._morsels(self._kernels(), "pack_chunks", _chunks(len(w)), rows, label, len(w), w,
                          _raw(c), width, take, kind, bool(desc), sign, ones, inf)
        return w

    def sort_values(self, spec, key, rows):
        key = np.ascontiguousarray(key)
        if len(key) == 0:
            return key.copy()
        bits, _ = self._radix(key, bool(spec.descending[0]), False, rows, f"{spec.name}_")
        return bits.view(key.dtype)

    # ---- gather -------------------------------------------------------------------------
    def gather(self, cols, perm, rows):
        perm = np.ascontiguousarray(perm, dtype=np.int64)
        out = []
        for col in cols:
            col = np.ascontiguousarray(col)
            if col.dtype.itemsize not in (1, 2, 4, 8) or col.ndim != 1:
                out.append(np.take(col, perm, axis=0))
                continue
            raw_t = f"u{col.dtype.itemsize}"
            res = np.empty(len(perm), col.dtype)
            self._morsels(self._kernels(), "gather_chunks", _chunks(len(perm)), rows, "",
                          col.view(raw_t), perm, res.view(raw_t))
            out.append(res)
        return out

    # ---- scan ---------------------------------------------------------------------------
    def scan(self, spec, values, params, rows):
        dtype = np.dtype(spec.dtype)
        x = np.ascontiguousarray(values, dtype=dtype)
        n = len(x)
        if n == 0:
            return x.copy()
        mod = self._scan_module(spec)
        store = np.dtype(storage_dtype(spec.dtype))
        out = np.empty(n, store)
        ps = param_args(spec.params, params)
        xs = x.view(store)
        carries = self._carries(mod, spec, xs, ps, rows)
        self._morsels(mod, f"{spec.name}_chunks", _chunks(n), rows, "", xs, out, carries, *ps)
        return out.view(dtype)

    def _carries(self, mod, spec, xs, ps, rows) -> np.ndarray:
        """C[c], the fold of everything before chunk c (seed first): the chunk totals by
        morsels (pass 1; none for a combine not known associative), then the carries in one
        call (ops/scan/cpu.py)."""
        nch = _chunks(len(xs))
        totals = np.empty(0 if spec.in_order else nch - 1, np.dtype(numba_scan_fused.carry_dtype(spec)))
        if len(totals):
            self._morsels(mod, f"{spec.name}_totals", nch - 1, rows, "", xs, totals, *ps)
        return self._call(mod, f"{spec.name}_carries", rows, "", xs, totals, *ps)

    def _scan_module(self, spec):
        mod = self._scans.get(spec)
        if mod is None:
            mod = self._scans.put(spec, load(spec.name, numba_scan.render(spec, cache=True)))
        return mod

    def scan_carries(self, spec, values, params, rows):
        """The scan's first phase alone: C[c], the fold of everything before chunk c (seed
        first), in the scan's register type; the pass fused after the scan runs the second
        phase in its own loop (ops/scan/fused_cpu.py, pipeline.StagedPrepared)."""
        x = np.ascontiguousarray(values, dtype=np.dtype(spec.dtype))
        ps = param_args(spec.params, params)
        store = np.dtype(storage_dtype(spec.dtype))
        return self._carries(self._scan_module(spec), spec, x.view(store), ps, rows)

    # ---- group_by -----------------------------------------------------------------------
    def grouper(self):
        """The one CpuGroupBy of these stages (its modules loaded once; the fused group_by
        merges with its aggregates' modules)."""
        if self._group is None:
            from .cpu_group import CpuGroupBy
            self._group = CpuGroupBy(self)
        return self._group

    def group_by(self, spec, keys, values, params, rows):
        """Hash tables per chunk for <= 4096 groups, else a radix sort (cpu_group.py)."""
        return self.grouper()(spec, keys, values, params, rows)

    def join(self, left_keys, right_keys, outer, rows):
        """Hash join: build on the smaller side, probe in parallel chunks (cpu_join.py)."""
        if self._join is None:
            self._join = CpuJoin(self)
        return self._join(left_keys, right_keys, outer, rows)

    def semi_join(self, left_keys, right_keys, rows):
        """The join's hash table of the other side, a flag per row (cpu_join.CpuJoin.member)."""
        if self._join is None:
            self._join = CpuJoin(self)
        return self._join.member(left_keys, right_keys, rows)

    def describe_group_by(self, spec):
        from querycompute._codegen.ops.group.fused_cpu import fits
        fused = ("with <= 4096 groups it runs INSIDE the pass above (per-chunk tables; the key "
                 "and input columns are never stored), else " if fits(spec.key_dtypes) else "")
        return [f"cpu: {fused}per-chunk group-id tables (<= 4096 groups) or a radix sort (none "
                "when the pass finding the runs finds the key already in order; integer keys "
                "wider than 64 bits together packed by their value ranges), then the aggregates "
                "in source-chunk order"]

    def describe_join(self, this_dtypes, other_dtypes, semi):
        """They name the runtime that really runs the join (cpu_join.reference_reason)."""
        why = reference_reason(key_types(list(this_dtypes), other_dtypes))
        if semi:
            if why:
                return [f"cpu: the join's hash table when the keys pack into one 64-bit word, else the "
                        f"numpy reference (ops/join/reference.semi_reference; the trace names which ran): {why}"]
            return ["cpu: the other side's keys built into the join's hash table (join_build), a flag "
                    "per row from a parallel probe (join_member: bloom test, then the table); no pairs, "
                    "nothing gathered; keys filling a dense range (<= 64 bits of range per key: a "
                    "min/max pass) into a bitmap of it instead (member_dense)"]
        if why and "value ranges" in why:
            return [f"cpu: hash join on the keys packed by their value ranges, or the numpy "
                    f"reference (ops/join/reference.join_reference) when those do not fit: {why}"]
        if why:
            return [f"numpy reference (ops/join/reference.join_reference: a stable sort of the other side's "
                    f"keys, binary searches), not the cpu hash join: {why}"]
        return ["cpu: hash join: the smaller side built (indexed directly by key when it is one integer "
                "key of dense values, by the rank of its bit in a bitmap of their range when <= 64 "
                "values per key), the other probed in parallel chunks (a bloom array in front of "
                "the hash table), pairs in LINQ's order"]

    def describe_distinct(self, spec):
        words = key_words(spec.key_dtypes)
        if words is not None:
            per_row = "one 64-bit word" if len(words) == 1 else "two 64-bit words"
            runs = ("; a key tuple whose first field is already in ascending order (a check in "
                    "the same pass): each row against the earlier rows of its run of equal first "
                    "fields instead" if len(spec.key_dtypes) > 1 else "")
            return [f"cpu: per-partition hash sets of the keys' order bits ({per_row} per "
                    f"row), first occurrences kept in source order{runs}"]
        return [f"cpu: the keys ({', '.join(spec.key_dtypes)}) don't fit two 64-bit words "
                f"(whole columns in each): a stable LSD radix sort of them, the first row of "
                f"each run of equal keys kept"]

    def fused_group(self, p, spec, keys, values, inputs, params, gparams, n, rows):
        """The pass `p` and the group_by after it in one pass (<= 4096 groups), or None
        (cpu_group_fused.py)."""
        if self._fused is None:
            from .cpu_group_fused import CpuFusedGroup
            self._fused = CpuFusedGroup(self)
        return self._fused(p, spec, keys, values, inputs, params, gparams, n, rows)

    # ---- distinct -----------------------------------------------------------------------
    def first_occurrence(self, spec, keys, rows):
        keys = [np.ascontiguousarray(c) for c in keys]
        n = len(keys[0])
        if n == 0:
            return np.zeros(0, dtype=bool)
        words = key_words(c.dtype for c in keys)
        if words is None:
            return self._first_by_sort(spec, keys, rows)
        u2 = _NO_WORDS
        if len(keys) == 1:
            u = _raw(keys[0])
            kind, sign, ones, inf = _consts(keys[0].dtype)
        else:
            keep = self._distinct_runs(keys, rows, f"{spec.name}_")
            if keep is not None:
                return keep
            u, u2 = self._words(keys, words, rows, f"{spec.name}_")
            kind, sign, ones, inf = _consts(np.dtype(np.uint64))
        return self._distinct(u, u2, (kind, sign, ones, inf), rows, f"{spec.name}_")

    def _words(self, keys, words, rows, label) -> tuple:
        """(u, u2): the key tuple as one or two 64-bit words of its fields' order bits
        (key_words(...) says which fields go in which word); u2 empty for one word. One integer
        field alone is its raw bits (equal as its order bits are)."""
        if len(keys) == 1 and keys[0].dtype.kind in "iub":
            return _raw(keys[0]), _NO_WORDS
        u, *rest = [self._pack((False,) * len(w), [keys[j] for j in w], rows, label) for w in words]
        return u, (rest[0] if rest else _NO_WORDS)

    def _distinct_runs(self, keys, rows, label):
        """First-occurrence flags of a key tuple whose first field is already in ascending
        order, each row compared with the earlier rows of its run of equal first fields
        (ops/sort/cpu_kernels.distinct_runs) on the OTHER fields only (within a run the first
        is equal; one integer field is compared as it is, without a packing pass); None when
        a chunk finds the field out of order or a run over RUN_MAX rows (the hash sets run
        then: the first chunks out of order stop the check, morsels.py)."""
        first, rest = keys[0], keys[1:]
        u, u2 = self._words(rest, key_words(c.dtype for c in rest), rows, label)
        n = len(u)
        bad = np.zeros(_chunks(n), np.bool_)
        keep = np.empty(n, np.bool_)
        self._morsels(self._kernels(), "distinct_runs", len(bad), rows, label, n, _raw(first), u,
                      u2, keep, bad, *_consts(first.dtype), stop=bad.any)
        return None if bad.any() else keep

    def _distinct(self, u, u2, consts, rows, label) -> np.ndarray:
        """First-occurrence flags of the words u (and u2): hash partitions of ~16K rows
        (each one's hash set stays in a core's L2; one chunk or less: one partition, no
        scatter), a stable counting scatter into them, a hash set per partition."""
        mod, n = self._kernels(), len(u)
        nch = _chunks(n)
        pbits = 0 if nch == 1 else int(min(12, max(1, round(np.log2(n / 16384)))))
        npart, psh = 1 << pbits, 64 - pbits
        words = np.empty(n, np.uint64)
        hc = np.zeros((nch, npart), np.int64)
        self._morsels(mod, "distinct_words", nch, rows, label, n, u, u2, words, hc, psh, *consts)
        keep = np.empty(n, np.bool_)
        if npart == 1:
            start = np.array([0, n], np.int64)
            self._morsels(mod, "distinct_sets", 1, rows, label, start, words, u2, _NO_IDX, keep, 0)
            return keep
        # offsets in (partition, chunk) order: a partition's rows in index order
        total = hc.sum(axis=0)
        start = np.append(np.cumsum(total) - total, n).astype(np.int64)
        off = start[None, :-1] + (np.cumsum(hc, axis=0) - hc)
        pw, pidx = np.empty(n, np.uint64), np.empty(n, np.int64)
        pw2 = np.empty(n if len(u2) else 0, np.uint64)
        self._morsels(mod, "distinct_scatter", nch, rows, label, n, words, u2, off, psh, pw, pw2, pidx)
        self._morsels(mod, "distinct_sets", npart, rows, label, start, pw, pw2, pidx, keep, pbits)
        return keep

    def _first_by_sort(self, spec, keys, rows) -> np.ndarray:
        """Key tuples that don't fit two words: run starts of the stable sort (the first row of
        each run of equal keys has the smallest index)."""
        ascending = type(spec)(spec.key_dtypes, (False,) * len(keys), spec.name)
        perm = self._full_sort(ascending, keys, rows)
        keep = np.empty(len(perm), dtype=bool)
        keep[perm] = order_keys.run_starts(keys, perm)
        return keep

