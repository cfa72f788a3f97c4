"""GPU column operations "sort" and "distinct": a stable LSD radix sort of SortSpec key
columns with an index permutation as payload, and distinct's first-occurrence flags (the
gather of columns by the permutation: ops/sort/gather_gpu.py). Kernel IR for CUDA, OpenCL and Metal; launch.plan runs them from
`KernelSet.schedule` (launch.Step), the launch loop of every GPU runtime unchanged.

Sort order: order_keys.py (NaN last both ways, -0.0 == 0.0, descending per key), computed by
order_keys.ir_bits from each key's raw bits. A multi-key sort is LSD over the keys too: the
LAST key's digits first, each key's digits from its least significant byte up.

Small n (n <= TILE = 1024 rows): one block, `<name>_small`, sorts everything in shared
memory: the words `slot` of all rows, re-digited from the keys (read at their slot) before
each of the key bytes' 8-round split sorts (sort_ir.tile_sort), then perm[s] = slot.

Large n, per 8-bit digit pass (a key's bits: 1, 2, 4 or 8 passes), one kernel
`<name>_pass_*` launched twice around a scan:
  1. phase 0 (one block per tile of TILE rows): the tile's rows sorted by digit in shared
     memory (sort_ir.tile_sort), digit runs -> counts[digit * tiles + tile]. Only for a
     key's first byte when the counts are folded (below).
  2. `<name>_scan` (one block): exclusive prefix sum of all counts, in place: (digit, tile)'s
     first output position — digits in order, tiles in order within a digit.
  3. phase 1: the same tile sort, then the row in sorted slot s goes to
     counts[digit * tiles + tile] + (s - start of its digit's run): a row keeps its place
     among rows of equal digit (earlier tiles first, then its rank in the tile), so every
     pass is stable and the passes together are an LSD sort.
Folded counts (int32 indices, n < 2**31): pass p + 1's tiles are consecutive rows of pass
p's output, so pass p's scatter, which knows each row's destination `dest` and holds its
bits, adds 1 to the next pass's count of (next digit, dest / TILE) with an atomic add; pass
p + 1 then needs no counting read. Two int32 counts buffers alternate (value "cpar"): the
scan of a pass scans the current one and zeroes the other, which the scatter after it fills.
Additions commute, so the counts (and the permutation) are deterministic. Metal has no
64-bit atomics: hence int32 counts, and with int64 indices every pass counts by a read.
The (bits, perm) pairs ping-pong between buffers a and b ("parity" value: 0 reads b and
writes a), arranged so the last pass writes perm_a, the result. Where rows come from: the
first pass reads key j raw and writes perm = row; the first pass of an earlier key (then_by
order) reads key j at perm[row] ("gather"); the key's further passes read the bits the
previous pass wrote ("bits"). The last byte of a key writes no bits.
Index payload: int32 when n < 2**31 (GpuStages picks it), else int64: `render_sort(...,
index_dtype)`. Counts and offsets are int32 with int32 indices, else int64.

Distinct (shape "distinct"): the sort of all keys ascending (kernels `<name>_distinct_*`),
then `<name>_distinct_flags`: sorted row s
is a first occurrence when s == 0 or its keys' order bits differ from row s - 1's; the flag is
stored at the row's original position. Equal keys sort stably, so the first row of each run
is the one with the smallest index.

Bytes per element (`bytes_per_element`): 32-bit keys and a 32-bit payload: pass 1 reads the key
for its counts (4), then again (4) and writes bits + index (8) = 16 B; the middle passes read
and write bits + index (16 B, counts folded); the last writes only the index: 12 B -> 60 B in
4 passes (72 B with int64 indices, whose counts are read). The atomic adds hit a counts array
of 1 B per row (256 int32 per tile of 1024 rows), like the scan: left out of the figure.
"""
from __future__ import annotations

from ...ir import kernel_ir as K
from ... import order_keys
from ...dialects.by_name import DIALECTS, printer
from ...launch import BLOCK, BufferSpec, KernelArg, KernelSet, KernelSpec, Step
from ...lower.block import LID
from ...ir.stage_specs import SortSpec
from . import ir as S
from .ir import I32, I64, RADIX, SLOT, TILE, U32

__all__ = ["render_sort", "bytes_per_element", "passes",
           "render_kernels"]

N = K.KVar("n", I64)
SHIFT, PARITY, LAST = K.KVar("shift", I64), K.KVar("parity", I64), K.KVar("last", I64)
PHASE, CPAR = K.KVar("phase", I64), K.KVar("cpar", I64)
BASE, ROW = K.KVar("base", I64), K.KVar("row", I64)
TILES = K.KVar("tiles", I64)
COUNTS, COUNTS_B = "counts", "counts_b"


def folds(index_dtype: str, dialect: str = "") -> bool:
    """Whether a scatter adds the next pass's (digit, tile) counts with atomics: with int32
    indices (n < 2**31), whose counts are int32 (Metal has no 64-bit atomic add), in a dialect
    with an atomic add on a plain buffer (DialectCaps.buffer_atomics; WGSL's needs atomic<i32>
    buffer types: there every pass counts by a read). Another name (the default "": the
    figures of bytes_per_element without a dialect) is taken to have one."""
    declared = DIALECTS.get(dialect)
    return index_dtype == "int32" and (declared is None or declared.CAPS.buffer_atomics)


def key_arg(spec: SortSpec, j: int) -> KernelArg:
    return KernelArg(f"key{j}", "input", order_keys.bits_dtype(spec.key_dtypes[j]), j)


def counts_pass(index_dtype: str, shift: int, dialect: str = "") -> bool:
    """Whether a pass launches its counting phase: the first byte of each key, or every pass
    without folded counts."""
    return shift == 0 or not folds(index_dtype, dialect)


def passes(spec: SortSpec) -> list[tuple[int, int, str, bool]]:
    """(key, shift, source, last byte of the key) per radix pass, in launch order."""
    out = []
    for j in reversed(range(len(spec.key_dtypes))):
        width = order_keys.bits_width(spec.key_dtypes[j])
        for shift in range(0, width, 8):
            source = "bits" if shift else ("raw" if not out else "gather")
            out.append((j, shift, source, shift + 8 == width))
    return out


def bytes_per_element(spec: SortSpec, index_dtype: str = "int32", distinct: bool = False,
                      dialect: str = "") -> list[tuple[str, int]]:
    """(kernel, bytes read + written per row) of every launch of a large sort (or distinct),
    in order (the counts scan moves 8 B per (digit, tile): under 2 B per row; left out)."""
    idx = 4 if index_dtype == "int32" else 8
    if distinct:
        spec = SortSpec(spec.key_dtypes, (False,) * len(spec.key_dtypes), f"{spec.name}_distinct")
        keys = sum(order_keys.bits_width(d) // 8 for d in spec.key_dtypes)
        # flags: perm[s] and perm[s - 1], both rows' keys, one flag byte
        return bytes_per_element(spec, index_dtype, dialect=dialect) + [(f"{spec.name}_flags", 2 * idx + 2 * keys + 1)]
    out = []
    for j, shift, source, last in passes(spec):
        w = order_keys.bits_width(spec.key_dtypes[j]) // 8
        read = {"raw": w, "gather": idx + w, "bits": w}[source]
        read_pair = read + (idx if source == "bits" else 0)
        if counts_pass(index_dtype, shift, dialect):
            out.append((f"{_kname(spec, j, source)} (counts)", read))
        out.append((f"{_kname(spec, j, source)} (scatter)", read_pair + idx + (0 if last else w)))
    return out


def _kname(spec: SortSpec, j: int, source: str) -> str:
    if source == "bits":
        return f"{spec.name}_pass_{order_keys.bits_dtype(spec.key_dtypes[j])}"
    return f"{spec.name}_pass_key{j}" + ("_gather" if source == "gather" else "")


# ---- buffers ----------------------------------------------------------------------------------
class _Buffers:
    """The ping-pong buffers of one kernel set: perm a/b (index dtype) and bits a/b per bits
    dtype, as kernel arguments; `perm_a` is output 0 of a sort, scratch in distinct."""

    def __init__(self, index_dtype: str, perm_a_is_output: bool, dialect: str = ""):
        self.idx = index_dtype
        self.perm_a = (KernelArg("perm_a", "output", index_dtype, 0) if perm_a_is_output
                       else KernelArg("perm_a", "scratch", index_dtype, scratch="perm_a"))
        self.perm_b = KernelArg("perm_b", "scratch", index_dtype, scratch="perm_b")
        self.fold = folds(index_dtype, dialect)
        self.cdt = I32 if self.fold else I64            # counts and offsets fit the index type
        self.counts = [KernelArg(c, "scratch", self.cdt, scratch=c) for c in (COUNTS, COUNTS_B)[:1 + self.fold]]

    def count_at(self, index) -> K.KExpr:
        """The current pass's counts / offsets: counts, or counts_b when cpar == 1."""
        if not self.fold:
            return K.KLoad(COUNTS, index, I64)
        return K.KSelect(K.op("==", CPAR, K.i64(0)), K.KLoad(COUNTS, index, I32), K.KLoad(COUNTS_B, index, I32), I32)

    def count_store(self, index, value) -> K.Stmt:
        if not self.fold:
            return K.Store(COUNTS, index, value)
        return K.If(K.op("==", CPAR, K.i64(0)), (K.Store(COUNTS, index, value),), (K.Store(COUNTS_B, index, value),))

    def count_next(self, index) -> K.If:
        """Atomically add 1 to the next pass's (digit, tile) count: the other counts buffer."""
        old = K.KVar("old", I32)
        one = K.KConst(1, I32)
        return K.If(K.op("==", CPAR, K.i64(0)), (K.Declare(old, K.i32(0)), K.AtomicAdd(old, COUNTS_B, index, one)),
                    (K.Declare(old, K.i32(0)), K.AtomicAdd(old, COUNTS, index, one)))

    @staticmethod
    def bits(u: str, side: str) -> KernelArg:
        return KernelArg(f"bits_{side}", "scratch", u, scratch=f"bits_{u}_{side}")

    def read(self, a: KernelArg, b: KernelArg, index) -> K.KExpr:
        """The buffer the previous pass wrote: b when parity == 0."""
        return K.KSelect(K.op("==", PARITY, K.i64(0)), K.KLoad(b.name, index, b.dtype),
                         K.KLoad(a.name, index, a.dtype), a.dtype)

    @staticmethod
    def write(a: KernelArg, b: KernelArg, index, value) -> K.If:
        return K.If(K.op("==", PARITY, K.i64(0)), (K.Store(a.name, index, value),), (K.Store(b.name, index, value),))


def _source(spec: SortSpec, bufs: _Buffers, j: int, source: str, row,
            need_perm: bool = True) -> tuple[list, K.KVar, K.KExpr, list]:
    """(statements, order bits of key j for `row`, its permutation value, the args read)."""
    dtype, desc = spec.key_dtypes[j], spec.descending[j]
    key = key_arg(spec, j)
    if source == "raw":
        stmts, t = order_keys.ir_bits(dtype, desc, K.KLoad(key.name, row, key.dtype), "t")
        return stmts, t, K.KCast(row, bufs.idx), [key]
    if source == "gather":
        p = K.KVar("p", bufs.idx)
        stmts, t = order_keys.ir_bits(dtype, desc, K.KLoad(key.name, p, key.dtype), "t")
        return [K.Declare(p, bufs.read(bufs.perm_a, bufs.perm_b, row))] + stmts, t, p, [key, bufs.perm_a, bufs.perm_b]
    u = order_keys.bits_dtype(dtype)
    a, b = bufs.bits(u, "a"), bufs.bits(u, "b")
    t = K.KVar("t", order_keys.register_type(dtype))
    p = K.KVar("p", bufs.idx)
    stmts = [K.Declare(t, K.KCast(bufs.read(a, b, row), t.dtype))]
    if not need_perm:
        return stmts, t, p, [a, b]
    return stmts + [K.Declare(p, bufs.read(bufs.perm_a, bufs.perm_b, row))], t, p, [a, b, bufs.perm_a, bufs.perm_b]


def _load_tile(spec, bufs, j, source) -> tuple[list, list]:
    """Statements putting the tile's rows into shared memory as (digit, slot) words, sorted."""
    stmts, t, _, args = _source(spec, bufs, j, source, ROW, need_perm=False)
    live = [*stmts, K.Store(S.SH_KEYS, SLOT, S.pack(S.digit_of(t, SHIFT), SLOT))]
    dead = (K.Store(S.SH_KEYS, SLOT, S.pack(S.u32(RADIX - 1), SLOT, K.i32(1))),)
    body = [K.Declare(ROW, K.op("+", BASE, K.KCast(SLOT, I64))),
            K.If(K.op("<", ROW, N), tuple(live), dead)]
    sort, at = S.tile_sort(8)
    assert at == 0
    head = [K.Declare(BASE, K.op("*", K.KCast(S.GROUP, I64), K.i64(TILE))),
            K.Declare(TILES, K.op("/", K.op("+", N, K.i64(TILE - 1)), K.i64(TILE))),
            K.Comment("The tile's rows as (digit, slot) words in shared memory; rows past n sort last."),
            S.slots_strided(body), K.Barrier(), *sort]
    return head, args


def _pass_kernel(spec, bufs, j, source) -> K.Kernel:
    """One radix pass's tile work: phase 0 counts the tile's digits, phase 1 scatters its
    rows (both start with the same tile sort, so one kernel serves both)."""
    head, args = _load_tile(spec, bufs, j, source)
    w, d, src, dest = K.KVar("w", U32), K.KVar("d", I32), K.KVar("src", I64), K.KVar("dest", I64)
    stmts, t, p, _ = _source(spec, bufs, j, source, src)
    u = order_keys.bits_dtype(spec.key_dtypes[j])
    a, b = bufs.bits(u, "a"), bufs.bits(u, "b")
    group = K.KCast(S.GROUP, I64)
    d_count = K.op("-", K.KLoad(S.SH_END, LID, I32), K.KLoad(S.SH_START, LID, I32))
    count = (K.Comment("Phase 0: thread d writes digit d's count of this tile."),
             bufs.count_store(K.op("+", K.op("*", K.KCast(LID, I64), TILES), group), K.KCast(d_count, bufs.cdt)))
    first = K.KCast(bufs.count_at(K.op("+", K.op("*", K.KCast(d, I64), TILES), group)), I64)
    rank = K.KCast(K.op("-", SLOT, K.KLoad(S.SH_START, d, I32)), I64)
    # Not the key's last byte: the bits go on to the next pass, which (with folded counts)
    # finds the row in tile dest / TILE under its next digit.
    nxt = K.op("+", K.op("*", K.KCast(S.digit_of(t, K.op("+", SHIFT, K.i64(8))), I64), TILES),
               K.op("/", dest, K.i64(TILE)))
    onward = ([bufs.write(a, b, dest, t)] if order_keys.bits_width(spec.key_dtypes[j]) > 8 else []) + \
        ([bufs.count_next(nxt)] if bufs.fold and order_keys.bits_width(spec.key_dtypes[j]) > 8 else [])
    write_bits = [K.If(K.op("==", LAST, K.i64(0)), tuple(onward))] if onward else []
    body = [K.Declare(w, K.KLoad(S.SH_KEYS, SLOT, U32)),
            K.If(S.word_live(w), (
                K.Declare(d, S.word_digit(w)),
                K.Declare(src, K.op("+", BASE, K.KCast(S.word_slot(w), I64))),
                *stmts,
                K.Declare(dest, K.op("+", first, rank)),
                bufs.write(bufs.perm_a, bufs.perm_b, dest, p), *write_bits))]
    scatter = (K.Comment("Phase 1: the row in sorted slot s goes after the earlier tiles' rows of its\n"
                         "digit (counts: their exclusive prefix sum), at its rank in the tile."),
               S.slots_strided(body))
    code = head + S.digit_runs(0, with_end=True) + [K.If(K.op("==", PHASE, K.i64(0)), count, scatter)]
    extra = ([a, b] if write_bits else []) + bufs.counts[1:]
    name = _kname(spec, j, source)
    kargs = (*_dedupe(args + [bufs.perm_a, bufs.perm_b] + extra), KernelArg("n", "n", I64),
             bufs.counts[0], KernelArg("shift", "value", I64), KernelArg("parity", "value", I64),
             KernelArg("phase", "value", I64), KernelArg("last", "value", I64),
             *([KernelArg("cpar", "value", I64)] if bufs.fold else []))
    return K.Kernel(name, kargs, S.shared(True, True), tuple(code),
                    doc=f"{name}: one radix pass over a tile: digit counts (phase 0) or stable scatter (phase 1).")


def _dedupe(args) -> list:
    seen, out = set(), []
    for a in args:
        if a.name not in seen:
            seen.add(a.name)
            out.append(a)
    return out


def small_kernel(spec: SortSpec, name: str, count: KernelArg, out: KernelArg, via: KernelArg | None) -> K.Kernel:
    """One block sorts `count` (<= TILE) rows: rows are 0..count-1, or via[0..count-1]."""
    cnt = K.KVar(count.name, I64)
    w, slot, src, sh = K.KVar("w", U32), K.KVar("slot", I32), K.KVar("src", I64), K.KVar("shift", I32)
    row_of = (lambda sl: K.KCast(K.KLoad(via.name, sl, via.dtype), I64)) if via else (lambda sl: K.KCast(sl, I64))
    stmts = [K.Comment("Words (digit, slot) of the rows; slots at or past the count sort last."),
             S.slots_strided([K.Store(S.SH_KEYS, SLOT, K.KSelect(
                 K.op("<", K.KCast(SLOT, I64), cnt), S.pack(S.u32(0), SLOT),
                 S.pack(S.u32(RADIX - 1), SLOT, K.i32(1)), U32))]),
             K.Barrier()]
    for j in reversed(range(len(spec.key_dtypes))):
        key = key_arg(spec, j)
        bits, t = order_keys.ir_bits(spec.key_dtypes[j], spec.descending[j], K.KLoad(key.name, src, key.dtype), "t")
        redigit = [K.Declare(w, K.KLoad(S.SH_KEYS, SLOT, U32)),
                   K.If(S.word_live(w), (K.Declare(slot, S.word_slot(w)), K.Declare(src, row_of(slot)), *bits,
                                         K.Store(S.SH_KEYS, SLOT, S.pack(S.digit_of(t, sh), slot))))]
        sort, _ = S.tile_sort(8)
        stmts.append(K.For(sh, K.i32(0), K.op("<", sh, K.i32(order_keys.bits_width(spec.key_dtypes[j]))),
                           K.op("+", sh, K.i32(8)), (S.slots_strided(redigit), K.Barrier(), *sort)))
    final = S.word_slot(K.KLoad(S.SH_KEYS, SLOT, U32))
    final = K.KLoad(via.name, final, via.dtype) if via else final
    stmts.append(S.slots_strided([K.If(K.op("<", K.KCast(SLOT, I64), cnt), (
        K.Store(out.name, SLOT, final if final.dtype == out.dtype else K.KCast(final, out.dtype)),))]))
    args = (*[key_arg(spec, j) for j in range(len(spec.key_dtypes))], count, *([via] if via else []), out)
    return K.Kernel(name, args, S.shared(False), tuple(stmts),
                    doc=f"{name}: one-block stable sort of up to {TILE} rows, every key byte in shared memory.")


def _flags_kernel(spec: SortSpec, perm: KernelArg) -> K.Kernel:
    """flags[perm[s]] = sorted row s starts a run of equal keys."""
    name = f"{spec.name}_flags"
    i = K.KVar("i", I64)
    p, q, keep = K.KVar("p", I64), K.KVar("q", I64), K.KVar("keep", "bool")
    differ = []
    for j, dtype in enumerate(spec.key_dtypes):
        key = key_arg(spec, j)
        bp, tp = order_keys.ir_bits(dtype, False, K.KLoad(key.name, p, key.dtype), f"a{j}")
        bq, tq = order_keys.ir_bits(dtype, False, K.KLoad(key.name, q, key.dtype), f"b{j}")
        differ += [*bp, *bq, K.Assign(keep, K.op("||", keep, K.op("!=", tp, tq)))]
    body = [K.Declare(i, K.op("+", K.op("*", K.KCast(S.GROUP, I64), K.i64(TILE)), K.KCast(SLOT, I64))),
            K.If(K.op("<", i, N), (
                K.Declare(p, K.KCast(K.KLoad(perm.name, i, perm.dtype), I64)),
                K.Declare(keep, K.op("==", i, K.i64(0))),
                K.If(K.op(">", i, K.i64(0)), (K.Declare(q, K.KCast(K.KLoad(perm.name, K.op("-", i, K.i64(1)), perm.dtype), I64)),
                                              *differ)),
                K.Store("flags", p, keep)))]
    args = (*[key_arg(spec, j) for j in range(len(spec.key_dtypes))], perm, KernelArg("n", "n", I64),
            KernelArg("flags", "output", "bool", 0))
    return K.Kernel(name, args, (), (S.slots_strided(body),),
                    doc=f"{name}: distinct's first-occurrence flags, from the ascending sort.")


def render_kernels(spec: SortSpec, index_dtype: str, distinct: bool, dialect: str = "") -> tuple[list, list[Step]]:
    """(kernels, schedule) of a sort (or distinct) of spec's keys."""
    if distinct:
        spec = SortSpec(spec.key_dtypes, (False,) * len(spec.key_dtypes), f"{spec.name}_distinct")
    bufs = _Buffers(index_dtype, perm_a_is_output=not distinct, dialect=dialect)
    kernels = {}
    small = small_kernel(spec, f"{spec.name}_small", KernelArg("n", "n", I64), bufs.perm_a, None)
    kernels[small.name] = small
    scan = S.scan_counts_kernel(f"{spec.name}_scan", COUNTS, bufs.cdt, COUNTS_B if bufs.fold else None)
    kernels[scan.name] = scan
    schedule = [Step(small.name, (), "small")]
    ps = passes(spec)
    for p, (j, shift, source, last) in enumerate(ps):
        name = _kname(spec, j, source)
        if name not in kernels:
            kernels[name] = _pass_kernel(spec, bufs, j, source)
        cpar = (("cpar", p % 2),) if bufs.fold else ()
        common = (("shift", shift), ("parity", (len(ps) - 1 - p) % 2), ("last", int(last))) + cpar
        if counts_pass(index_dtype, shift, dialect):
            schedule.append(Step(name, common + (("phase", 0),), "large"))
        schedule += [Step(scan.name, (("rows", RADIX),) + cpar, "large"),
                     Step(name, common + (("phase", 1),), "large")]
    if distinct:
        flags = _flags_kernel(spec, bufs.perm_a)
        kernels[flags.name] = flags
        schedule.append(Step(flags.name))
    return list(kernels.values()), schedule


def _grid(k: K.Kernel) -> str:
    return "one" if k.name.endswith(("_small", "_scan", "_select")) else "tiles"


def kernel_set(kernels, schedule, dialect: str, name: str, shape: str, outputs, scratch) -> KernelSet:
    pr = printer(dialect)
    header = (f"// querycompute column operation {name}: {shape}, {len(kernels)} kernels, {dialect}\n"
              f"// compile options: {' '.join(pr.OPTIONS) or '(none)'}"
              + (f" ({pr.OPTIONS_WHY})" if pr.OPTIONS_WHY else ""))
    source = pr.render(kernels, header)
    specs = tuple(KernelSpec(k.name, k.args, _grid(k), "any", k.name.rsplit("_", 1)[-1]) for k in kernels)
    return KernelSet(dialect=dialect, pass_name=name, shape=shape, source=source, options=pr.OPTIONS,
                     kernels=specs, outputs=tuple(outputs), scratch=tuple(scratch), block=BLOCK,
                     elems_per_thread=S.EPT, schedule=tuple(schedule))


def _scratch(kernels, skip=()) -> list[BufferSpec]:
    """Every scratch buffer the kernels use: counts per (digit, tile), the rest per row."""
    out = {}
    for k in kernels:
        for a in k.args:
            if a.kind == "scratch" and a.scratch not in skip:
                size = f"tiles*{RADIX}" if a.scratch in (COUNTS, COUNTS_B) else "n"
                out[a.scratch] = BufferSpec(a.scratch, a.dtype, size)
    return list(out.values())


def render_sort(spec: SortSpec, dialect: str, index_dtype: str = "int32", distinct: bool = False) -> KernelSet:
    """The sort (output 0: the permutation, n entries of `index_dtype`) or, with `distinct`,
    the first-occurrence flags (output 0: n bools) of spec's key columns, bound as their
    order_keys.bits_dtype (inputs 0..)."""
    for d in spec.key_dtypes:
        order_keys.bits_width(d)
    kernels, schedule = render_kernels(spec, index_dtype, distinct, dialect)
    outputs = [BufferSpec("flags", "bool", "n")] if distinct else [BufferSpec("perm_a", index_dtype, "n")]
    return kernel_set(kernels, schedule, dialect, spec.name, "distinct" if distinct else "sort",
                      outputs, _scratch(kernels))
