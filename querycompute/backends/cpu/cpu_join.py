"""The cpu backend's join (CpuStages.join): a numba hash join giving ops/join/reference.join_reference's
pairs exactly (LINQ's order: left order, then right order among a left row's matches; an
outer join's unmatched left rows once, with -1).

    1. both sides' keys converted to their common NumPy type (np.promote_types, as the
       reference); one key: its raw bits; several: their order bits packed into one uint64
       word (the stage kernels' `pack`) when their dtypes fit 64 bits together; integer keys
       wider than that by their VALUES' ranges (`range_packed`: a min/max pass over
       the smaller side, or both, each field's offset from its minimum in as many bits as its
       range needs), when those fit 64 bits together (e.g. an int64 order key and an int32
       line number); the packed words, integers, may take the dense routes below;
    2. the SMALLER side is built into a hash table (ops/join/cpu_kernels.py: join_build), the other
       probes it in chunks by morsels (join_probe_counts, join_probe_write);
    3. built on the right: the probe's pairs are already in LINQ's order; built on the
       left: the pairs come in right order and a counting scatter by left row
       (join_by_left) restores it.
One integer key whose values on the build side span at most DENSE_SPAN values per row (a
min/max pass) is indexed directly instead (join_dense_*: a range test and one load per
probe; the same passes and pairs), as in TPC-H's joins on part, supplier, customer keys; one
spanning at most DENSE_BITS values per row (at least RANKED_MIN_ROWS rows) is indexed by the
rank of its bit in a bitmap of the range (join_rank_build, then the same passes: a range test, a bit test and a popcount per
probe), as a filtered primary key (Q5's orders of one year). An inner join's first pass keeps
each probe row's hit as a bit, so the second walks the hits only.
A semi-join (CpuJoin.member: intersect_by / except_by) builds the other side into the same
table and probes this side for a flag per row (join_member_chunks), no pairs; when the other
side's words fill a dense range (at most DENSE_BITS bits of range per row: a min/max pass),
into a bitmap of that range instead (member_dense_build, member_dense_chunks).
Equality is that of order bits (NaN == NaN, -0.0 == 0.0). Key tuples wider than 64 bits
together, with a float field or with value ranges too wide to pack, run the numpy reference
(`reference_reason`, which explain() prints too), and their trace row says so (dialect "numpy").
"""
from __future__ import annotations

import numpy as np

from querycompute._codegen.order_keys import numba_consts as _consts, raw_bits as _raw

from .morsels import chunks as _chunks
from .numba_loader import load, stage_kernels_source
from ..stage_runtime import NumpyStages

# a build side of one integer key spanning at most this many values per row (and at most
# DENSE_MAX values) is indexed directly (join_dense_*): 4 bytes of head per value
DENSE_SPAN = 4
DENSE_MAX = 1 << 28

# ... and one of at least RANKED_MIN_ROWS rows spanning at most DENSE_BITS values per row by
# the ranks of a bitmap of its range (join_rank_build); a smaller one keeps the hash table,
# whose table and bloom array then stay in a core's L2 (<= 1 MB): its bloom-word probe cost
# less there than the bitmap's (Q7's 800 suppliers, 12K customers: 1.8M and 1.5M probes)
RANKED_MIN_ROWS = 1 << 15

# a semi-join whose other side has more than this many times this side's rows first keeps only
# the other side's keys that occur on this side (CpuJoin.member): its serial build is the cost
SEMI_SHRINK = 4
# a semi-join whose other side's keys span at most this many values per key (a min/max pass)
# tests a bitmap of that range instead of the hash table (CpuJoin.member); a small side may
# span up to DENSE_BITS * DENSE_MIN_ROWS values (64 KB)
DENSE_BITS, DENSE_MIN_ROWS = 64, 8192


def kernels_source() -> str:
    """The stage kernels' text with ops/join/cpu_kernels.py's appended (it uses order_bits)."""
    return stage_kernels_source("join/cpu_kernels.py")


def key_types(left_dtypes, right_dtypes) -> list:
    """Both sides' key dtypes converted to their common NumPy type (np.promote_types, as the
    reference), field by field."""
    return [np.promote_types(a, b) for a, b in zip(left_dtypes, right_dtypes)]


def reference_reason(common) -> str:
    """Why a join on keys of the common dtypes `common` may run the numpy reference on the
    cpu, or "" when the numba hash join always runs it: its table holds one 64-bit word per
    key, so a key tuple wider than 64 bits together packs only by its values' ranges (integer
    fields, `range_packed`), else has no native path. The rule CpuJoin.__call__ follows and
    explain() prints."""
    bits = 8 * sum(np.dtype(c).itemsize for c in common)
    if bits <= 64:
        return ""
    what = f"a key of {len(common)} fields, {bits} bits together ({', '.join(str(c) for c in common)})"
    if all(np.dtype(c).kind in "biu" for c in common):
        return (f"{what}: the hash join runs when the fields' value ranges (a min/max pass) fit 64 "
                f"bits together, else the numpy reference (the trace names which ran)")
    return f"{what}, with a float field, has no native path: the hash join packs a key into one 64-bit word"


def key_ranges(sides: list):
    """(lo, width) of each integer key field and the bits they take together, over the rows
    of `sides` (lists of a side's field columns, not all empty): field i's values are its
    offsets from the minimum, in the bits its range needs."""
    spans, total = [], 0
    for cols in zip(*sides):
        both = [c for c in cols if len(c)]
        lo = min(int(c.min()) for c in both)
        width = (max(int(c.max()) for c in both) - lo).bit_length()
        spans.append((lo, width))
        total += width
    return spans, total


def range_packed(left: list, right: list):
    """(left words, right words): integer key fields packed into one uint64 per row by their
    values' ranges (key_ranges: field i's offset from its minimum, in the bits its range
    needs, above the fields after it), or None when those need more than 64 bits together.
    The ranges are the smaller side's alone (the side with rows, when one has none) when they
    take under 64 bits (no min/max pass over the larger side): a value of the other side
    outside them makes its word all ones, which no packed key reaches; else both sides'.
    Injective on the key tuples of the ranges' rows, so equal words are equal keys, and
    ordered as those tuples (cpu_group packs a group key so)."""
    small = left if 0 < len(left[0]) <= len(right[0]) or not len(right[0]) else right
    spans, total = key_ranges([small])
    if total >= 64:
        spans, total = key_ranges([left, right])
        if total > 64:
            return None
    return [_packed(side, spans, total) for side in (left, right)]


def range_packed_one(cols: list):
    """One side's integer key fields (rows > 0) packed by their own ranges (range_packed's
    words, ordered as the key tuples: cpu_group packs a group key so), or None when those
    need more than 64 bits together."""
    spans, total = key_ranges([cols])
    return None if total > 64 else _packed(cols, spans, total)


def _packed(side: list, spans: list, total: int) -> np.ndarray:
    """The words of one side's fields by `spans` (key_ranges); all ones outside them."""
    word, shift = np.zeros(len(side[0]), np.uint64), total
    outside = np.zeros(len(side[0]), np.bool_)
    for col, (lo, width) in zip(side, spans):
        shift -= width
        off = col.astype(np.uint64) - np.uint64(lo % 2**64)   # (mod 2**64: wraps below lo)
        outside |= off > np.uint64(2**width - 1)
        word |= off << np.uint64(min(shift, 63))
    word[outside] = ~np.uint64(0)
    return word


class CpuJoin:
    """The join of one CpuStages (its kernel module loaded once per instance)."""

    def __init__(self, stages):
        self.stages = stages
        self._mod = None

    def _kernels(self):
        if self._mod is None:
            self._mod = load("qc_join_kernels", kernels_source(), native=True)
        return self._mod

    def words(self, left_keys, right_keys, rows: list):
        """(left words, right words, their order-bits constants): each side's key as one
        64-bit word per row (module doc, step 1); None where the numpy reference must run;
        "empty" where a side has no rows."""
        st = self.stages
        common = key_types([np.asarray(a).dtype for a in left_keys], [np.asarray(b).dtype for b in right_keys])
        packed = None
        if reference_reason(common):
            if not all(c.kind in "biu" for c in common):
                return None
            lk = [np.asarray(a, dtype=c) for a, c in zip(left_keys, common)]
            rk = [np.asarray(b, dtype=c) for b, c in zip(right_keys, common)]
            if len(lk[0]) and len(rk[0]):        # (an empty side: no pairs, below)
                packed = range_packed(lk, rk)
                if packed is None:
                    return None
        left = [np.ascontiguousarray(a, dtype=c) for a, c in zip(left_keys, common)]
        right = [np.ascontiguousarray(b, dtype=c) for b, c in zip(right_keys, common)]
        if len(left[0]) == 0 or len(right[0]) == 0:
            return "empty"
        if packed is not None:           # integer fields packed by their value ranges
            return packed[0], packed[1], _consts(np.dtype(np.uint64))
        if len(common) == 1:
            return _raw(left[0]), _raw(right[0]), _consts(common[0])
        falses = (False,) * len(common)
        return (st._pack(falses, left, rows, "join_left_"), st._pack(falses, right, rows, "join_right_"),
                _consts(np.dtype(np.uint64)))

    def member(self, left_keys, right_keys, rows: list) -> np.ndarray:
        """CpuStages.semi_join: the other (right) side built into the join's hash table, a
        flag per left row from a parallel probe (join_member: the bloom test, then the table
        walk to the first match; nothing is paired or gathered). The build is serial, so an
        other side much larger than this one (SEMI_SHRINK times) is first cut to its keys that
        occur here: this side built, the other probed in parallel, the hits kept (a semi-join
        of an EXISTS over a large table: TPC-H Q22's orders, 1.5M keys -> ~40k)."""
        got = self.words(left_keys, right_keys, rows)
        if got is None:
            return NumpyStages.semi_join(self.stages, left_keys, right_keys, rows)
        nl = len(left_keys[0])
        if got == "empty":
            return np.zeros(nl, dtype=bool)    # no other keys (or no rows): nothing occurs
        lu, ru, consts = got
        mod = self._kernels()
        st = self.stages
        lo, hi = st._call(mod, "join_bounds", rows, "semi_", ru, *consts)
        if self._dense(lo, hi, len(ru)):
            return self._member_dense(mod, lu, ru, lo, hi, consts, rows, "semi_")
        if len(ru) > SEMI_SHRINK * nl:
            slots, _, bloom = st._call(mod, "join_build", rows, "semi_this_", lu, *consts)
            ru = ru[self._member(mod, ru, slots, bloom, consts, rows, "semi_other_")]
            if len(ru) == 0:
                return np.zeros(nl, dtype=bool)
        slots, _, bloom = st._call(mod, "join_build", rows, "semi_", ru, *consts)
        return self._member(mod, lu, slots, bloom, consts, rows, "")

    def _dense(self, lo, hi, m: int) -> bool:
        """Whether m words from lo to hi (order bits) take the dense bitmap: at most
        DENSE_BITS bits per word (a small side: up to 64 KB)."""
        return int(hi) - int(lo) < DENSE_BITS * max(m, DENSE_MIN_ROWS)

    def _member_dense(self, mod, lu, ru, lo, hi, consts, rows, label) -> np.ndarray:
        """The flags from a bitmap of the other side's words over [lo, hi] (ops/join/
        cpu_kernels.py, dense member): one serial pass sets the bits, the probe by morsels."""
        lo, span = np.uint64(lo), np.uint64(int(hi) - int(lo))     # (numba hands back ints)
        bits = self.stages._call(mod, "member_dense_build", rows, label, ru, lo, span, *consts)
        out = np.empty(len(lu), np.bool_)
        self.stages._morsels(mod, "member_dense_chunks", _chunks(len(lu)), rows, label, len(lu), lu,
                             lo, span, bits, out, *consts)
        return out

    def _member(self, mod, v, slots, bloom, consts, rows, label) -> np.ndarray:
        out = np.empty(len(v), np.bool_)
        self.stages._morsels(mod, "join_member_chunks", _chunks(len(v)), rows, label, len(v), v,
                             slots, bloom, out, *consts)
        return out

    def _dense_pairs(self, mod, build, probe, outer, rows):
        """The pairs (probe rows, build rows) by the direct index of a dense build side (its
        keys spanning at most DENSE_SPAN values per row) or by the ranks of a bitmap of its
        range (at least RANKED_MIN_ROWS rows, at most DENSE_BITS values per row), or None when
        its keys are not one integer column that dense."""
        if build.dtype.kind not in "iu" or len(build) == 0 or len(build) >= 2 ** 31:
            return None
        lo, hi = int(build.min()), int(build.max())
        size = hi - lo + 1
        if size > DENSE_MAX or hi >= 2 ** 63:
            return None
        st = self.stages
        if size <= DENSE_SPAN * len(build) + 64:
            head, nxt, chained = st._call(mod, "join_dense_build", rows, "", build, lo, size)
            bits, ranks, ranked = np.zeros(0, np.uint64), np.zeros(0, np.uint32), False
        elif len(build) >= RANKED_MIN_ROWS and self._dense(lo, hi, len(build)):
            bits, ranks, head, nxt, chained = st._call(mod, "join_rank_build", rows, "", build,
                                                       np.int64(lo), np.int64(size - 1))
            ranked = True
        else:
            return None
        n, nch = len(probe), _chunks(len(probe))
        cnt = np.zeros(nch + 1, np.int64)
        dense = (head, nxt, bool(chained), np.int64(lo), bits, ranks, ranked, outer,
                 np.empty(0 if outer else (n + 63) >> 6, np.uint64))      # (the hits' bit words)
        st._morsels(mod, "join_dense_counts", nch, rows, "", n, probe, *dense, cnt)
        off = np.cumsum(cnt)
        pi, bj = np.empty(int(off[-1]), np.int64), np.empty(int(off[-1]), np.int64)
        st._morsels(mod, "join_dense_write", nch, rows, "", n, probe, *dense, off, pi, bj)
        return pi, bj

    def _probe(self, mod, v, table, outer, consts, rows) -> tuple:
        """(probe rows, build rows) of every match, in probe order: pass 1 counts per chunk,
        offsets, pass 2 writes (CHUNK is a multiple of 64: a chunk owns whole bloom words)."""
        n, nch = len(v), _chunks(len(v))
        st = self.stages
        bw = np.empty(0 if outer else (n + 63) >> 6, np.uint64)
        cnt = np.zeros(nch + 1, np.int64)
        st._morsels(mod, "join_probe_counts", nch, rows, "", n, v, bw, *table, outer, cnt, *consts)
        off = np.cumsum(cnt)
        pi, bj = np.empty(int(off[-1]), np.int64), np.empty(int(off[-1]), np.int64)
        st._morsels(mod, "join_probe_write", nch, rows, "", n, v, bw, off, *table, outer, pi, bj,
                    *consts)
        return pi, bj

    def __call__(self, left_keys, right_keys, outer: bool, rows: list) -> tuple:
        st = self.stages
        got = self.words(left_keys, right_keys, rows)
        if got is None:
            return NumpyStages.join(st, left_keys, right_keys, outer, rows)
        nl = len(left_keys[0])
        if got == "empty":
            li = np.arange(nl, dtype=np.int64) if outer else np.zeros(0, np.int64)
            return li, np.full(len(li), -1, np.int64)
        lu, ru, consts = got
        nr = len(ru)
        mod = self._kernels()
        build_right = nr <= nl
        build, probe = (ru, lu) if build_right else (lu, ru)
        got = None
        if len(left_keys) > 1:         # packed words: integers, equal when the keys are
            got = self._dense_pairs(mod, build, probe, outer and build_right, rows)
        else:                          # one integer key: dense build keys are indexed directly
            # (the words are raw-bit views of the keys in their common type: view them back)
            common = key_types([np.asarray(left_keys[0]).dtype], [np.asarray(right_keys[0]).dtype])[0]
            if common.kind in "iu":
                got = self._dense_pairs(mod, build.view(common), probe.view(common), outer and build_right, rows)
        if got is None:
            table = st._call(mod, "join_build", rows, "", build, *consts)   # serial: one call
            got = self._probe(mod, probe, table, outer and build_right, consts, rows)
        pi, bj = got
        if build_right:
            return pi, bj
        return st._call(mod, "join_by_left", rows, "", bj, pi, nl, outer)
