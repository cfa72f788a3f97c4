"""GPU column operation "topk": the first k rows of a stable sort of SortSpec key columns
(order_by().take(k); k = 1 is a min-by), without sorting the n rows: radix select, an
order-preserving compaction of the candidates, a one-block sort of the k candidates.
For n > TILE and k <= MAX_K = TILE (GpuStages runs the one-block or the full sort otherwise).
k is a kernel parameter (param 0): a new k never recompiles.

The composite key of a row is its keys' order bits (order_keys.py) one after the other, the
first key most significant; the threshold is the composite key of the k-th row in sorted
order. Device state ("state", uint64[keys + 1]): the threshold's bits per key, found so far,
and k_rem, how many rows equal to the threshold prefix still belong to the top k.

Radix select, one pass per key byte, most significant first (key 0's top byte first):
Kernels are named `<name>_topk_*`.
  1. `<name>_select_hist_key<j>` (tiles): a row takes part when its bits above this byte equal
     the threshold found so far (earlier keys whole, key j's higher bytes); each tile counts
     its taking part rows per digit (sort_ir.tile_sort with a 9th round on the "out" bit,
     then digit runs) -> counts[digit * tiles + tile].
  2. `<name>_select` (one block): thread d sums digit d over the tiles; a block prefix sum
     over digits finds the digit d* where the running count reaches k_rem; it is appended to
     the threshold, and k_rem -= rows with a smaller digit.
Afterwards the threshold is exact and k_rem = k - #(rows below it) rows equal to it go in.

Compaction (order-preserving, no atomics): `<name>_cmp_count` counts per tile the rows below
the threshold (lt) and equal to it (eq) -> counts[tile], counts[tiles + tile]; `<name>_scan`
(sort.py's counts scan) makes them exclusive offsets; `<name>_cmp_scatter` puts row i at
#lt before i + min(#eq before i, k_rem) when it is below the threshold, at #lt before i +
#eq before i when it is equal and #eq before i < k_rem: the k candidates in row order.
Finally `<name>_small` (sort.py's one-block sort, through the candidates) sorts them stably:
ties keep row order, as in the full sort.

Bytes per row: the key bytes once per select pass (a 32-bit key: 4 passes x 4 B) and twice
for the compaction; O(k) for the rest.
"""
from __future__ import annotations

from ...ir import kernel_ir as K
from ... import order_keys
from ...launch import BufferSpec, KernelArg, KernelSet, Step
from ...lower.block import LID, block_inclusive_scan
from ...ir.stage_specs import SortSpec
from . import ir as S
from .gpu import COUNTS, N, SHIFT, TILES, key_arg, kernel_set, small_kernel
from .ir import I32, I64, RADIX, TILE

MAX_K = TILE
STATE = "state"
__all__ = ["MAX_K", "render_topk", "bytes_per_element"]

K_ARG = KernelArg("k", "param", I64, 0)
U64 = "uint64"


def _state_of(spec: SortSpec, j: int) -> K.KExpr:
    return K.KCast(K.KLoad(STATE, K.i32(j), U64), order_keys.register_type(spec.key_dtypes[j]))


def _bits(spec, j, row, name):
    key = key_arg(spec, j)
    return order_keys.ir_bits(spec.key_dtypes[j], spec.descending[j], K.KLoad(key.name, row, key.dtype), name)


def _hist_kernel(spec: SortSpec, j: int) -> K.Kernel:
    row, s = K.KVar("row", I64), S.SLOT
    base = K.KVar("base", I64)
    take = K.KVar("take", "bool")
    stmts = []
    for i in range(j):
        b, t = _bits(spec, i, row, f"t{i}")
        stmts += [*b, K.Assign(take, K.op("&&", take, K.op("==", t, _state_of(spec, i))))]
    b, t = _bits(spec, j, row, f"t{j}")
    hi = K.op("+", SHIFT, K.i64(8))
    above = K.op("||", K.op(">=", hi, K.i64(order_keys.bits_width(spec.key_dtypes[j]))),
                 K.op("==", K.op(">>", K.op("^", t, _state_of(spec, j)), hi), K.KConst(0, t.dtype)))
    stmts += [*b, K.Assign(take, K.op("&&", take, above)),
              K.Store(S.SH_KEYS, s, S.pack(S.digit_of(t, SHIFT), s, K.KSelect(take, K.i32(0), K.i32(1), I32)))]
    body = [K.Declare(row, K.op("+", base, K.KCast(s, I64))),
            K.Declare(take, K.op("<", row, N)),
            K.If(take, tuple(stmts), (K.Store(S.SH_KEYS, s, S.pack(S.u32(RADIX - 1), s, K.i32(1))),))]
    sort, at = S.tile_sort(9)
    d_count = K.op("-", K.KLoad(S.SH_END, LID, I32), K.KLoad(S.SH_START, LID, I32))
    code = [K.Declare(base, K.op("*", K.KCast(S.GROUP, I64), K.i64(TILE))),
            K.Declare(TILES, K.op("/", K.op("+", N, K.i64(TILE - 1)), K.i64(TILE))),
            K.Comment("Rows whose higher bits match the threshold so far, as (out, digit, slot) words."),
            S.slots_strided(body), K.Barrier(), *sort, *S.digit_runs(at, with_end=True),
            K.Store(COUNTS, K.op("+", K.op("*", K.KCast(LID, I64), TILES), K.KCast(S.GROUP, I64)), K.KCast(d_count, I64))]
    name = f"{spec.name}_select_hist_key{j}"
    args = (*[key_arg(spec, i) for i in range(j + 1)], KernelArg("n", "n", I64),
            KernelArg(STATE, "scratch", U64, scratch=STATE), KernelArg(COUNTS, "scratch", I64, scratch=COUNTS),
            KernelArg("shift", "value", I64))
    return K.Kernel(name, args, S.shared(True, True), tuple(code),
                    doc=f"{name}: radix select step 1, per tile digit counts of the rows still in the running.")


def _select_kernel(spec: SortSpec) -> K.Kernel:
    m = len(spec.key_dtypes)
    c, b, incl, excl = K.KVar("c", I64), K.KVar("b", I64), K.KVar("incl", I64), K.KVar("excl", I64)
    krem, prefix = K.KVar("krem", I64), K.KVar("prefix", U64)
    j, first, top = K.KVar("key", I64), K.KVar("first", I64), K.KVar("top", I64)
    k = K.KVar("k", I64)
    code = (K.Declare(TILES, K.op("/", K.op("+", N, K.i64(TILE - 1)), K.i64(TILE))),
            K.Declare(c, K.i64(0)),
            K.For(b, K.i64(0), K.op("<", b, TILES), K.op("+", b, K.i64(1)),
                  (K.Assign(c, K.op("+", c, K.KLoad(COUNTS, K.op("+", K.op("*", K.KCast(LID, I64), TILES), b), I64))),)),
            K.Comment("State read before the scan's barriers; one thread rewrites it after them."),
            K.Declare(krem, K.KSelect(K.op("!=", first, K.i64(0)), k, K.KCast(K.KLoad(STATE, K.i32(m), U64), I64), I64)),
            K.Declare(prefix, K.KSelect(K.op("!=", top, K.i64(0)), K.KConst(0, U64), K.KLoad(STATE, j, U64), U64)),
            *block_inclusive_scan(c, incl, "sh_count"),
            K.Declare(excl, K.op("-", incl, c)),
            K.If(K.op("&&", K.op("<", excl, krem), K.op("<=", krem, incl)), (
                K.Store(STATE, j, K.op("|", prefix, K.op("<<", K.KCast(LID, U64), SHIFT))),
                K.Store(STATE, K.i32(m), K.KCast(K.op("-", krem, excl), U64)))))
    name = f"{spec.name}_select"
    args = (KernelArg(COUNTS, "scratch", I64, scratch=COUNTS), KernelArg("n", "n", I64), K_ARG,
            KernelArg(STATE, "scratch", U64, scratch=STATE), KernelArg("key", "value", I64),
            KernelArg("shift", "value", I64), KernelArg("first", "value", I64), KernelArg("top", "value", I64))
    return K.Kernel(name, args, (K.SharedArray("sh_count", I64, S.BLOCK),), code,
                    doc=f"{name}: radix select step 2, the threshold's next digit (one block).")


def _compare(spec: SortSpec, row) -> tuple[list, K.KVar]:
    """Statements setting `cmp` to -1 / 0 / 1: row's composite key vs the threshold."""
    cmp = K.KVar("cmp", I32)
    stmts = [K.Declare(cmp, K.i32(0))]
    for j in range(len(spec.key_dtypes)):
        b, t = _bits(spec, j, row, f"t{j}")
        th = _state_of(spec, j)
        stmts.append(K.If(K.op("==", cmp, K.i32(0)), (*b, K.Assign(cmp, K.KSelect(
            K.op("<", t, th), K.i32(-1), K.KSelect(K.op(">", t, th), K.i32(1), K.i32(0), I32), I32)))))
    return stmts, cmp


def _own_rows(body) -> K.For:
    """Thread t's EPT consecutive rows (row order = tile, thread, element)."""
    e, row = K.KVar("e", I32), K.KVar("row", I64)
    first = K.op("+", K.op("*", K.KCast(S.GROUP, I64), K.i64(TILE)), K.KCast(K.op("*", LID, K.i32(S.EPT)), I64))
    return K.For(e, K.i32(0), K.op("<", e, K.i32(S.EPT)), K.op("+", e, K.i32(1)),
                 (K.Declare(row, K.op("+", first, K.KCast(e, I64))), K.If(K.op(">=", row, N), (K.Break(),)), *body),
                 unroll=True)


def _cmp_kernel(spec: SortSpec, scatter: bool, idx: str) -> K.Kernel:
    row = K.KVar("row", I64)
    lt, eq = K.KVar("lt", I64), K.KVar("eq", I64)
    lt_incl, eq_incl = K.KVar("lt_incl", I64), K.KVar("eq_incl", I64)
    cmp_stmts, cmp = _compare(spec, row)
    count = [K.Assign(lt, K.op("+", lt, K.KCast(K.op("<", cmp, K.i32(0)), I64))),
             K.Assign(eq, K.op("+", eq, K.KCast(K.op("==", cmp, K.i32(0)), I64)))]
    code = [K.Declare(TILES, K.op("/", K.op("+", N, K.i64(TILE - 1)), K.i64(TILE))),
            K.Declare(lt, K.i64(0)), K.Declare(eq, K.i64(0)),
            _own_rows([*cmp_stmts, *count]),
            *block_inclusive_scan(lt, lt_incl, "sh_lt"), *block_inclusive_scan(eq, eq_incl, "sh_eq")]
    group = K.KCast(S.GROUP, I64)
    if not scatter:
        code.append(K.If(K.op("==", LID, K.i32(0)), (
            K.Store(COUNTS, group, K.KLoad("sh_lt", K.i32(S.BLOCK - 1), I64)),
            K.Store(COUNTS, K.op("+", TILES, group), K.KLoad("sh_eq", K.i32(S.BLOCK - 1), I64)))))
    else:
        krem, lt_b, eq_b = K.KVar("krem", I64), K.KVar("lt_before", I64), K.KVar("eq_before", I64)
        total_lt = K.KLoad(COUNTS, TILES, I64)
        pos = K.KVar("pos", I64)
        place = [K.If(K.op("<", cmp, K.i32(0)), (
                     K.Declare(pos, K.op("+", lt_b, K.KSelect(K.op("<", eq_b, krem), eq_b, krem, I64))),
                     K.Store("cand", pos, K.KCast(row, idx)),
                     K.Assign(lt_b, K.op("+", lt_b, K.i64(1)))),
                     (K.If(K.op("==", cmp, K.i32(0)), (
                         K.If(K.op("<", eq_b, krem), (K.Store("cand", K.op("+", lt_b, eq_b), K.KCast(row, idx)),)),
                         K.Assign(eq_b, K.op("+", eq_b, K.i64(1))))),))]
        code += [K.Declare(krem, K.KCast(K.KLoad(STATE, K.i32(len(spec.key_dtypes)), U64), I64)),
                 K.Declare(lt_b, K.op("+", K.KLoad(COUNTS, group, I64), K.op("-", lt_incl, lt))),
                 K.Declare(eq_b, K.op("+", K.op("-", K.KLoad(COUNTS, K.op("+", TILES, group), I64), total_lt),
                                      K.op("-", eq_incl, eq))),
                 K.Comment("Candidates in row order: below the threshold, or equal and among the first k_rem equal."),
                 _own_rows([*cmp_stmts, *place])]
    name = f"{spec.name}_cmp_{'scatter' if scatter else 'count'}"
    args = (*[key_arg(spec, j) for j in range(len(spec.key_dtypes))], KernelArg("n", "n", I64),
            KernelArg(STATE, "scratch", U64, scratch=STATE), KernelArg(COUNTS, "scratch", I64, scratch=COUNTS),
            *([KernelArg("cand", "scratch", idx, scratch="cand")] if scatter else []))
    shared = (K.SharedArray("sh_lt", I64, S.BLOCK), K.SharedArray("sh_eq", I64, S.BLOCK))
    what = "write the k candidates in row order" if scatter else "rows below / equal to the threshold per tile"
    return K.Kernel(name, args, shared, tuple(code), doc=f"{name}: top-k compaction, {what}.")


def render_topk(spec: SortSpec, dialect: str, index_dtype: str = "int32") -> KernelSet:
    """Top-k of spec's key columns (inputs 0.., as order_keys.bits_dtype; param 0: k, at most
    MAX_K and below n; n > TILE). Output 0 (TILE entries of `index_dtype`): the first k hold
    the row indices of the k first rows of the stable sort."""
    from .ir import scan_counts_kernel
    spec = _named(spec)
    m = len(spec.key_dtypes)
    kernels, schedule = [], []
    select = _select_kernel(spec)
    scan = scan_counts_kernel(f"{spec.name}_scan", COUNTS)
    first = True
    for j, dtype in enumerate(spec.key_dtypes):
        kernels.append(_hist_kernel(spec, j))
        width = order_keys.bits_width(dtype)
        for shift in reversed(range(0, width, 8)):
            schedule += [Step(kernels[-1].name, (("shift", shift),)),
                         Step(select.name, (("key", j), ("shift", shift), ("first", int(first)),
                                            ("top", int(shift + 8 == width))))]
            first = False
    cand = KernelArg("cand", "scratch", index_dtype, scratch="cand")
    out = KernelArg("perm", "output", index_dtype, 0)
    small = small_kernel(spec, f"{spec.name}_small", K_ARG, out, cand)
    kernels += [select, scan, _cmp_kernel(spec, False, index_dtype), _cmp_kernel(spec, True, index_dtype), small]
    schedule += [Step(kernels[-3].name), Step(scan.name, (("rows", 2),)), Step(kernels[-2].name), Step(small.name)]
    scratch = [BufferSpec(COUNTS, I64, f"tiles*{RADIX}"), BufferSpec(STATE, U64, str(m + 1)),
               BufferSpec("cand", index_dtype, "tile")]
    return kernel_set(kernels, schedule, dialect, spec.name, "topk",
                      [BufferSpec("perm", index_dtype, "tile")], scratch)


def _named(spec: SortSpec) -> SortSpec:
    """Top-k kernels are named `<name>_topk_*` (apart from the sort's)."""
    return SortSpec(spec.key_dtypes, spec.descending, f"{spec.name}_topk")


def bytes_per_element(spec: SortSpec) -> list[tuple[str, int]]:
    """(kernel, bytes read per row) of the launches that touch every row (the rest: O(k))."""
    spec = _named(spec)
    widths = [order_keys.bits_width(d) // 8 for d in spec.key_dtypes]
    out = []
    for j, w in enumerate(widths):
        out += [(f"{spec.name}_select_hist_key{j}", sum(widths[:j + 1]))] * w
    return out + [(f"{spec.name}_cmp_count", sum(widths)), (f"{spec.name}_cmp_scatter", sum(widths))]

