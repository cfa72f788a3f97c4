"""GPU kernels of the hash join (backends/gpu_join.py runs them): kernel IR for CUDA C,
OpenCL C and MSL. WGSL has none: the join's counts and offsets (and wide keys' hashes) are
64-bit integers, which WGSL lacks (DialectCaps.int64 False: webgpu joins on the host reference;
`without_join` says why).

Equality is that of ops/join/reference.join_reference: the order bits (order_keys.py, spelled by
order_keys.ir_bits) of both sides' keys in their common type; all NaNs one value,
-0.0 == 0.0. Several key columns are one word: each key's order bits in its width, the first
key highest, packed into 64 bits (only when their widths add up to <= 64).

    hash     (one thread per row, both sides): word -> h = word * GOLDEN (mod 2**w). An odd
             multiplier is a bijection: equal h <=> equal word, and h's top bits are a
             Fibonacci hash of the word. w = 32 when the keys' bits fit 32 (`hash_dtype`:
             the build side's sort then takes 4 radix passes, not 8), else 64.
    (build)  the build side's h sorted by the radix sort (ops/sort/gpu.py, a stable LSD sort of
             h with the row as payload) and gathered (ops/sort/gather_gpu.py): a CSR table
             whose bucket b (the top `tbits` bits of h, 2**tbits >= rows) is one contiguous
             range, holding equal words next to each other, each run in row order.
    starts   (one thread per bucket, 2**tbits + 1): starts[b] = the first sorted row whose
             bucket is >= b (a binary search): bucket b is sorted rows starts[b]..starts[b+1].
    count    (one thread per probe row): the run of the probe's h inside its bucket (two
             binary searches, ~1 step for a bucket of ~1 row, log2(run) for a long one):
             cnt = run length (left_join: max(1, it)), lo = its first sorted row or -1.
    (scan)   inclusive int64 scan of cnt (ops/scan/gpu.py): pair k belongs to probe row q with
             incl[q - 1] <= k < incl[q].
    pairs    (one thread per output pair k): q = the first row with incl[q] > k (a binary
             search), j = k - (incl[q] - cnt[q]); probe[k] = q, build[k] = perm[lo[q] + j]
             (-1 when lo[q] is -1: left_join's unmatched row). One thread per pair, not per
             probe row: the launch loop sizes outputs by n, and a key every row shares (one
             long run) spreads over all threads instead of one thread writing m pairs.
             Pairs come out by probe row, then by build row: LINQ's order when the right
             side is the build side.
    gather_filled  out[i] = idx[i] < 0 ? fill : col[idx[i]] (left_join's right columns:
             NaN / 0 / False where a left row has no match).
Every step is integer work without atomics: the pairs are the same on every run and grid.

Why the build side is sorted by the whole hash, not by its bucket bits only (a counting
scatter by bucket, rows in row order inside a bucket, would take fewer radix passes): then
a bucket mixes words, a probe row's matches are not one run, and the pair writer would
walk the bucket to find a row's j-th match (a key every row shares: m steps per pair).
Sorted by h, equal words are adjacent (h is a bijection of the word) and stay in row order
(the sort is stable), so a row's matches are the run [lo, lo + cnt): O(log) per pair.
"""
from __future__ import annotations

from dataclasses import replace

from ... import dtypes as D
from ...ir import kernel_ir as K
from ... import order_keys
from ...dialects.by_name import DIALECTS, caps as dialect_caps, printer
from ...launch import BufferSpec, KernelArg, KernelSet
from ..sort import ir as S
from ..sort.gpu import kernel_set
from ..sort.ir import I64, SLOT, TILE

__all__ = ["GOLDEN", "device_keys", "hash_dtype", "render_hash", "render_starts", "render_count", "render_pairs",
           "render_gather_filled", "render_probe", "bytes_per_row", "without_join"]

U64, U32 = "uint64", "uint32"
# 2**w / golden ratio, odd: h = word * GOLDEN is a bijection of w-bit words
GOLDEN = {U64: 0x9E3779B97F4A7C15, U32: 0x9E3779B9}
HASH_BITS = {U64: 64, U32: 32}
N = K.KVar("n", I64)
SEARCH_STEPS = 64                    # binary searches over < 2**63 rows end well before


def without_join(dialect: str) -> str | None:
    """Why `dialect` has no join kernels (None: it has them): the join counts, offsets and
    hashes in 64-bit integers, so a dialect without them (DialectCaps.int64) joins on the host."""
    caps = dialect_caps(dialect)
    if caps.int64:
        return None
    return f"{caps.language} has no 64-bit integers (the join's counts, offsets and wide hashes)"


def __getattr__(attr: str):
    """`dialects_without_join`: dialect -> why, for every GPU dialect without join kernels
    (computed from the declared capabilities: without_join)."""
    if attr == "dialects_without_join":
        return {d: why for d in DIALECTS for why in [without_join(d)] if why is not None}
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


def device_keys(own: tuple[str, ...], common: tuple[str, ...]) -> str | None:
    """Why keys of dtypes `own`, compared in their `common` types, can't be hashed on the
    device (None: they can): their order bits must fit one 64-bit word, and a key converted
    to its common type must be an integer widened (a float conversion needs a bit cast the
    kernel IR does not spell)."""
    if sum(order_keys.bits_width(c) for c in common) > 64:
        return f"the key columns ({', '.join(common)}) are wider than 64 bits together"
    for o, c in zip(own, common):
        if o != c and (D.is_float(c) or D.is_float(o)):
            return f"a {o} key compared as {c} (a float conversion)"
    return None


def hash_dtype(common: tuple[str, ...]) -> str:
    """The hash's unsigned type: uint32 when the keys' order bits fit 32 bits together."""
    return U32 if sum(order_keys.bits_width(c) for c in common) <= 32 else U64


def _rows(body_of) -> K.For:
    """for every row i < n of this block's tile (sort_ir.slots_strided: coalesced)."""
    i = K.KVar("i", I64)
    return S.slots_strided([K.Declare(i, K.op("+", K.op("*", K.KCast(S.GROUP, I64), K.i64(TILE)),
                                                     K.KCast(SLOT, I64))),
                            K.If(K.op("<", i, N), tuple(body_of(i)))])


def _search(name: str, buf: str, dtype: str, lo, hi, target, upper: bool) -> tuple[list, K.KVar]:
    """Statements declaring `name`: the first position in buf[lo, hi) (ascending) whose value
    is > target (upper) or >= target (lower), hi if none."""
    a, b, mid, it = (K.KVar(f"{name}", I64), K.KVar(f"{name}_hi", I64), K.KVar(f"{name}_mid", I64),
                     K.KVar(f"{name}_it", "int32"))
    before = K.op("<=" if upper else "<", K.KLoad(buf, mid, dtype), target)
    body = (K.If(K.op(">=", a, b), (K.Break(),)),
            K.Declare(mid, K.op("+", a, K.op("/", K.op("-", b, a), K.i64(2)))),
            K.If(before, (K.Assign(a, K.op("+", mid, K.i64(1))),), (K.Assign(b, mid),)))
    return [K.Declare(a, lo), K.Declare(b, hi),
            K.For(it, K.i32(0), K.op("<", it, K.i32(SEARCH_STEPS)), K.op("+", it, K.i32(1)), body)], a


def _set(kernel: K.Kernel, dialect: str, outputs, name: str) -> KernelSet:
    return kernel_set([kernel], [], dialect, name, "join", outputs, [])


# ---- hash ---------------------------------------------------------------------------------------
def _word(own: tuple[str, ...], common: tuple[str, ...], i, hd: str) -> tuple[list, K.KExpr]:
    """The word (`hd`) of row i: each key's order bits in its common type, first key highest."""
    stmts, word = [], None
    for j, (o, c) in enumerate(zip(own, common)):
        raw = K.KLoad(f"key{j}", i, order_keys.bits_dtype(o))
        if o != c:               # an integer (or bool) widened: its value, then c's bits
            val = raw if o == "bool" or not D.is_signed(o) else K.KCast(raw, o)
            raw = K.KCast(K.KCast(val, c), order_keys.bits_dtype(c))
        bits, t = order_keys.ir_bits(c, False, raw, f"t{j}")
        stmts += bits
        tw = K.KCast(t, hd)
        word = tw if word is None else K.op("|", K.op("<<", word, K.KConst(order_keys.bits_width(c), hd)), tw)
    return stmts, word


def render_hash(own: tuple[str, ...], common: tuple[str, ...], dialect: str, name: str) -> KernelSet:
    """h[i] = word(i) * GOLDEN for key columns of dtypes `own` (bound as their bits dtypes,
    inputs 0..), compared as `common`; output 0: h (n, of hash_dtype(common))."""
    why = device_keys(own, common)
    if why:
        raise ValueError(f"{name}: {why}: the join runs the host reference for these keys")

    hd = hash_dtype(common)

    def body(i):
        stmts, word = _word(own, common, i, hd)
        return [*stmts, K.Store("h", i, K.op("*", word, K.KConst(GOLDEN[hd], hd)))]
    args = (*[KernelArg(f"key{j}", "input", order_keys.bits_dtype(o), j) for j, o in enumerate(own)],
            KernelArg("n", "n", I64), KernelArg("h", "output", hd, 0))
    k = K.Kernel(name, args, (), (_rows(body),),
                 doc=f"{name}: h = (the keys' order bits packed into a {HASH_BITS[hd]}-bit word) * GOLDEN.")
    return _set(k, dialect, [BufferSpec("h", hd, "n")], name)


# ---- the bucket table ----------------------------------------------------------------------------
def render_starts(dialect: str, hd: str = U64) -> KernelSet:
    """The starts kernel's set (`_starts_kernel`)."""
    return _set(_starts_kernel(hd), dialect, [BufferSpec("starts", I64, "n")], "qc_join_starts")


def _starts_kernel(hd: str, name: str = "qc_join_starts") -> K.Kernel:
    """n = buckets + 1 threads; input 0: the build side's h sorted (m rows); params m, shift
    (hash bits - tbits); output 0: starts (int64, n): starts[b] = first sorted row with
    h >> shift >= b, starts[buckets] = m."""
    m, shift = K.KVar("m", I64), K.KVar("shift", I64)

    def body(i):
        target = K.op("<<", K.KCast(i, hd), K.KCast(shift, hd))
        stmts, at = _search("at", "hs", hd, K.i64(0), m, target, upper=False)
        last = K.op("==", i, K.op("-", N, K.i64(1)))
        return [K.If(last, (K.Store("starts", i, m),), (*stmts, K.Store("starts", i, at)))]
    args = (KernelArg("hs", "input", hd, 0), KernelArg("m", "param", I64, 0),
            KernelArg("shift", "param", I64, 1), KernelArg("n", "n", I64),
            KernelArg("starts", "output", I64, 0))
    return K.Kernel(name, args, (), (_rows(body),),
                    doc=f"{name}: where each bucket (top bits of h) starts in the sorted build side.")


# ---- probe: count ----------------------------------------------------------------------------------
def render_count(dialect: str, hd: str = U64) -> KernelSet:
    """The count kernel's set (`_count_kernel`)."""
    return _set(_count_kernel(hd), dialect, [BufferSpec("cnt", I64, "n"), BufferSpec("lo", I64, "n")], "qc_join_count")


def _count_kernel(hd: str, name: str = "qc_join_count") -> K.Kernel:
    """n = probe rows; inputs: the probe side's h, the build side's sorted h, starts; params
    shift, outer (0 / 1); outputs: cnt (int64: matches, left_join max(1, matches)) and lo
    (int64: the first matching sorted build row, -1 when none)."""
    shift, outer = K.KVar("shift", I64), K.KVar("outer", I64)
    h, b, c = K.KVar("hv", hd), K.KVar("b", I64), K.KVar("c", I64)

    def body(i):
        first, lb = _search("lb", "hs", hd, K.KLoad("starts", b, I64),
                            K.KLoad("starts", K.op("+", b, K.i64(1)), I64), h, upper=False)
        run, ub = _search("ub", "hs", hd, lb, K.KLoad("starts", K.op("+", b, K.i64(1)), I64), h, upper=True)
        one = K.op("&&", K.op("!=", outer, K.i64(0)), K.op("==", c, K.i64(0)))
        return [K.Declare(h, K.KLoad("hp", i, hd)),
                K.Declare(b, K.KCast(K.op(">>", h, K.KCast(shift, hd)), I64)),
                K.Comment("the run of equal h in the bucket: equal words, in build row order"),
                *first, *run,
                K.Declare(c, K.op("-", ub, lb)),
                K.Store("cnt", i, K.KSelect(one, K.i64(1), c, I64)),
                K.Store("lo", i, K.KSelect(K.op(">", c, K.i64(0)), lb, K.i64(-1), I64))]
    args = (KernelArg("hp", "input", hd, 0), KernelArg("hs", "input", hd, 1),
            KernelArg("starts", "input", I64, 2), KernelArg("shift", "param", I64, 0),
            KernelArg("outer", "param", I64, 1), KernelArg("n", "n", I64),
            KernelArg("cnt", "output", I64, 0), KernelArg("lo", "output", I64, 1))
    return K.Kernel(name, args, (), (_rows(body),),
                    doc=f"{name}: per probe row, its matches' count and first sorted build row.")


# ---- probe: pairs ----------------------------------------------------------------------------------
def render_pairs(dialect: str, index_dtype: str) -> KernelSet:
    """The pairs kernel's set (`_pairs_kernel`)."""
    return _set(_pairs_kernel(index_dtype), dialect,
                [BufferSpec("probe", index_dtype, "n"), BufferSpec("build", index_dtype, "n")], "qc_join_pairs")


def _pairs_kernel(index_dtype: str, name: str = "qc_join_pairs") -> K.Kernel:
    """n = pairs; inputs: incl (the inclusive scan of cnt), cnt, lo (probe rows), perm (the
    build side's sort permutation, `index_dtype`); param p (probe rows); outputs: probe and
    build row of every pair (`index_dtype`; build -1 for left_join's unmatched rows)."""
    p, j, lo = K.KVar("p", I64), K.KVar("j", I64), K.KVar("l", I64)

    def body(i):
        stmts, at = _search("q", "incl", I64, K.i64(0), p, i, upper=True)
        build = K.KSelect(K.op("<", lo, K.i64(0)), K.KConst(-1, index_dtype),
                          K.KLoad("perm", K.op("+", lo, j), index_dtype), index_dtype)
        return [*stmts,
                K.Declare(j, K.op("-", i, K.op("-", K.KLoad("incl", at, I64), K.KLoad("cnt", at, I64)))),
                K.Declare(lo, K.KLoad("lo", at, I64)),
                K.Store("probe", i, K.KCast(at, index_dtype)),
                K.Store("build", i, build)]
    args = (KernelArg("incl", "input", I64, 0), KernelArg("cnt", "input", I64, 1),
            KernelArg("lo", "input", I64, 2), KernelArg("perm", "input", index_dtype, 3),
            KernelArg("p", "param", I64, 0), KernelArg("n", "n", I64),
            KernelArg("probe", "output", index_dtype, 0), KernelArg("build", "output", index_dtype, 1))
    return K.Kernel(name, args, (), (_rows(body),),
                    doc=f"{name}: pair k's probe row (a binary search of the offsets) and build row.")


def render_probe(dialect: str, index_dtype: str, hd: str = U64) -> dict[str, KernelSet]:
    """{"starts", "count", "pairs"}: their kernel sets for hashes of type `hd`, each holding
    all three kernels' source (one program: a driver that compiles per source builds the
    probe once), launching its own."""
    sets = {"starts": render_starts(dialect, hd), "count": render_count(dialect, hd),
            "pairs": render_pairs(dialect, index_dtype)}
    header = f"// querycompute column operation qc_join probe: starts, count ({hd}), pairs ({index_dtype}), {dialect}"
    source = printer(dialect).render([_starts_kernel(hd), _count_kernel(hd), _pairs_kernel(index_dtype)], header)
    return {k: replace(ks, source=source) for k, ks in sets.items()}


# ---- left_join's gather ---------------------------------------------------------------------------
_NAN_BITS = {"uint16": 0x7E00, "uint32": 0x7FC00000, "uint64": 0x7FF8000000000000}


def fill_bits(dtype: str) -> int:
    """The raw bits of ops/join/reference.fill_value(dtype): NaN (NumPy's) for floats, else 0."""
    return _NAN_BITS[order_keys.bits_dtype(dtype)] if D.is_float(dtype) else 0


def render_gather_filled(dtypes: tuple[str, ...], dialect: str, index_dtype: str = "int32",
                         name: str = "qc_join_gather_filled") -> KernelSet:
    """out_c[i] = idx[i] < 0 ? fill(c) : col_c[idx[i]] for columns of `dtypes` bound as their
    bits dtypes (inputs 0..m-1; input m: idx); n = len(idx)."""
    bits = [order_keys.bits_dtype(d) for d in dtypes]
    x = K.KVar("x", I64)

    def body(i):
        out = [K.Declare(x, K.KCast(K.KLoad("idx", i, index_dtype), I64))]
        for c, (d, u) in enumerate(zip(dtypes, bits)):
            out.append(K.Store(f"out{c}", i, K.KSelect(K.op("<", x, K.i64(0)), K.KConst(fill_bits(d), u),
                                                       K.KLoad(f"col{c}", x, u), u)))
        return out
    args = (*[KernelArg(f"col{c}", "input", u, c) for c, u in enumerate(bits)],
            KernelArg("idx", "input", index_dtype, len(bits)), KernelArg("n", "n", I64),
            *[KernelArg(f"out{c}", "output", u, c) for c, u in enumerate(bits)])
    k = K.Kernel(name, args, (), (_rows(body),),
                 doc=f"{name}: out = idx < 0 ? the dtype's fill (NaN / 0 / False) : col[idx].")
    return _set(k, dialect, [BufferSpec(f"out{c}", u, "n") for c, u in enumerate(bits)], name)


# ---- bytes per row (explain) ----------------------------------------------------------------------
def bytes_per_row(key_dtypes: tuple[str, ...], index_dtype: str = "int32") -> list[tuple[str, str]]:
    """(step, bytes read + written) of the join's kernels, per row of the side (or per output
    pair) it runs over; the build side's radix sort and gather are ops/sort/gpu.py's and
    ops/sort/gather_gpu.py's figures for the hash's type."""
    from ..sort import gather_gpu as gather_op
    from ..sort import gpu as sort_op
    from ...ir.stage_specs import SortSpec
    idx = 4 if index_dtype == "int32" else 8
    keys = sum(order_keys.bits_width(d) // 8 for d in key_dtypes)
    hd = hash_dtype(tuple(key_dtypes))
    h = HASH_BITS[hd] // 8
    sort = sum(b for _, b in sort_op.bytes_per_element(SortSpec((hd,), (False,), "qc_join_build"), index_dtype))
    by_left = sum(b for _, b in sort_op.bytes_per_element(SortSpec((index_dtype,), (False,), "qc_join_by_left"),
                                                          index_dtype))
    return [(f"qc_join_hash (per row of each side; {HASH_BITS[hd]}-bit h)", f"{keys + h}"),
            ("qc_join_build sort + gather of h (per build row)",
             f"{sort + gather_op.gather_bytes_per_element((hd,), index_dtype)}"),
            ("qc_join_starts (per bucket, ~1 per build row)", f"{8 + h}"),
            (f"qc_join_count (per probe row; + ~2 bucket reads of {h} B)", f"{h + 16 + 16}"),
            ("offsets scan (per probe row)", "16"),
            ("qc_join_pairs (per pair; + the binary search's reads)", f"{24 + idx + 2 * idx}"),
            ("built on the left: qc_join_by_left sort + gather of the pairs (per pair)",
             f"{by_left + gather_op.gather_bytes_per_element((order_keys.bits_dtype(index_dtype),) * 2, index_dtype)}")]
