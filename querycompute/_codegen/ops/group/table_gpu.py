"""GPU column operation "group_table": the low-cardinality group_by (<= MAX_GROUPS = 4096
groups) of a GroupSpec with per-chunk private hash tables merged in a fixed order, for CUDA,
OpenCL and Metal (one kernel IR). The sort-based path (ops/group/gpu.py) is the fallback: the
host runtime (backends/gpu_group_table.py) runs it when this one reports an overflow.

Layout. The rows are cut into CHUNKS = 64 logical chunks of `per` rows (per = ceil(n /
(CHUNKS * BLOCK)) * BLOCK: a function of n alone). Every chunk has its own table of SLOTS =
8192 slots in a scratch buffer, split into BLOCK regions of REGION = 32 slots: region t
belongs to thread t of whichever block runs the chunk. A row's key hashes (order bits of
every key, -0.0 == 0.0, every NaN one key) to h; thread h % BLOCK owns the row and looks its
key up in its region by linear probing from (h / BLOCK) % REGION. A slot is empty while its
count is 0; it holds the raw key bits of its first row, the count, one running fold per lane
(group_ir.Lane: sum min max any all fold, without the seed) and the first row's value of
every `first` aggregate. Nothing is shared between threads but the rows' hashes, so there
are no atomics and no races.

Kernels:
  1. `<name>_table_partials` (grid "reduce", looping over the logical chunks: the physical
     grid changes nothing): per chunk, rounds of BLOCK rows; each thread stores its row's
     hash in shared memory, then every thread walks the round's hashes IN ROW ORDER and
     folds the rows it owns into its region. Each slot therefore folds its rows in source
     order. A row whose region is full sets the thread's overflow flag (tover[chunk, t]).
  2. `<name>_table_merge` (one block): thread t merges region t of chunk 0, 1, 2, ... in
     that order into region t of the outputs (same hash, same probing), then applies each
     fold's seed once in front (group_ir.Combiner.finish). A region that cannot take a key,
     or a chunk's overflow flag, makes gcount[SLOTS] = -1 (else 0).
Determinism: every fold's grouping (rows in order within a chunk, chunks in order) depends
only on n and the data, never on the grid or on timing: float results are identical run to
run and across grid sizes. They are NOT the sort path's bits (other groupings) but agree
with it within rounding, like any fixed order.

Outputs (SLOTS + 1 entries each, one slot per table slot; the host keeps the slots with a
count, sorts them by key and checks gcount[SLOTS] and <= MAX_GROUPS groups): the group keys
(raw key bits), one column per non-count aggregate, the int64 counts.

Bytes per element: partials reads every key and value once (plus 4 B of hash through shared
memory); the tables are CHUNKS * SLOTS slots, independent of n (merge reads them once).
"""
from __future__ import annotations

from ...ir import kernel_ir as K
from ... import order_keys
from ...dialects.by_name import printer
from ...launch import BLOCK, BufferSpec, KernelArg, KernelSet, KernelSpec
from ...lower.block import LID
from ...lower.element import check_name
from ...ir.stage_specs import GroupSpec
from . import ir as G
from ..sort import ir as S
from .ir import I32, I64
from .gpu import sort_spec
from ..sort.gpu import key_arg, passes

__all__ = ["SHAPE", "render_group_table", "bytes_per_element", "describe", "MAX_GROUPS", "SLOTS", "CHUNKS", "worth_trying"]

SHAPE = "group_table"
MAX_GROUPS = 4096
CHUNKS = 64                 # logical chunks (tables); the physical grid may be smaller
REGION = 32                 # slots per thread region
SLOTS = BLOCK * REGION      # slots per table
MAX_CHEAP_PASSES = 2        # keys of at most 2 bytes: the sort path runs directly (worth_trying)
U32 = "uint32"
N = K.KVar("n", I64)
SH_H = "sh_hash"


def _u32(v: int) -> K.KConst:
    return K.KConst(v, U32)


class _Lower:
    def __init__(self, spec: GroupSpec, index_dtype: str):
        check_name(spec.name, "group_by")
        self.spec = spec
        self.lanes = G.lanes(spec)[1:]            # the count is the slot's own column
        self.comb = G.Combiner(spec)
        m = len(spec.key_dtypes)
        self.keys = [key_arg(sort_spec(spec), j) for j in range(m)]
        self.values, self.outs, self.gkeys, self.counts, self.params = G.result_args(spec, self.keys)
        sc = [(f"tk{j}", a.dtype) for j, a in enumerate(self.keys)] + [("tcount", I64)]
        sc += [(f"tv{a}", agg.dtype) for a, agg in enumerate(spec.aggs) if agg.op != "count"]
        self.tables = [KernelArg(nm, "scratch", dt, scratch=nm) for nm, dt in sc]
        self.tover = KernelArg("tover", "scratch", I32, scratch="tover")
        self.firsts = [a for a, agg in enumerate(spec.aggs) if agg.op == "first"]

    def name(self, suffix: str) -> str:
        return f"{self.spec.name}_table_{suffix}"

    # ---- hashing and probing ---------------------------------------------------------------
    def hash_of(self, load, tag: str) -> tuple[list, list, K.KVar]:
        """Statements declaring the keys' order bits (t<tag><j>) and their hash h<tag>; load(j)
        reads key j's raw bits."""
        h = K.KVar(f"h{tag}", U32)
        stmts, bits = [K.Declare(h, _u32(0x811C9DC5))], []
        for j, d in enumerate(self.spec.key_dtypes):
            st, t = order_keys.ir_bits(d, False, load(j), f"t{tag}{j}")
            stmts += st
            bits.append(t)
            words = [K.KCast(t, U32)]
            if t.dtype == "uint64":
                words.append(K.KCast(K.op(">>", t, K.KConst(32, "uint64")), U32))
            for w in words:
                stmts.append(K.Assign(h, K.op("*", K.op("^", h, w), _u32(0x01000193))))
        stmts += [K.Assign(h, K.op("^", h, K.op(">>", h, _u32(16)))),
                  K.Assign(h, K.op("*", h, _u32(0x45D9F3B))),
                  K.Assign(h, K.op("^", h, K.op(">>", h, _u32(16))))]
        return stmts, bits, h

    def probe(self, h, bits, base, count_buf: str, key_bufs: list, on_new: list, on_hit: list,
              slot: K.KVar, tag: str) -> list:
        """Linear probing in the region at `base` (REGION slots) for the key whose order bits
        are `bits`: on_new / on_hit run with `slot` declared; `placed` (declared by the caller)
        becomes true."""
        q, c, same = K.KVar(f"q{tag}", I32), K.KVar(f"c{tag}", I64), K.KVar(f"same{tag}", "bool")
        start = K.KCast(K.op("%", K.op("/", h, _u32(BLOCK)), _u32(REGION)), I32)
        cmp = []
        for j, d in enumerate(self.spec.key_dtypes):
            st, t = order_keys.ir_bits(d, False, K.KLoad(key_bufs[j], slot, self.keys[j].dtype), f"s{tag}{j}")
            cmp += [*st, K.Assign(same, K.op("&&", same, K.op("==", t, bits[j])))]
        body = (K.Declare(slot, K.op("+", base, K.KCast(K.op("%", K.op("+", start, q), K.i32(REGION)), I64))),
                K.Declare(c, K.KLoad(count_buf, slot, I64)),
                K.If(K.op("==", c, K.i64(0)), (*on_new, K.Assign(PLACED, K.KConst(True, "bool")), K.Break())),
                K.Declare(same, K.KConst(True, "bool")),
                *cmp,
                K.If(same, (*on_hit, K.Assign(PLACED, K.KConst(True, "bool")), K.Break())))
        return [K.Declare(PLACED, K.KConst(False, "bool")),
                K.For(q, K.i32(0), K.op("<", q, K.i32(REGION)), K.op("+", q, K.i32(1)), body)]

    # ---- kernels -----------------------------------------------------------------------------
    def partials(self) -> K.Kernel:
        chunk, per, start, stop = K.KVar("chunk", I64), K.KVar("per", I64), K.KVar("start", I64), K.KVar("stop", I64)
        r0, row, cnt, i = K.KVar("r0", I64), K.KVar("row", I64), K.KVar("cnt", I64), K.KVar("i", I64)
        region, full, hh, p, slot = (K.KVar("region", I64), K.KVar("full", I32), K.KVar("hh", U32),
                                     K.KVar("p", I64), K.KVar("slot", I64))
        z = K.KVar("z", I32)
        mine_st, _, mine_h = self.hash_of(lambda j: K.KLoad(self.keys[j].name, row, self.keys[j].dtype), "r")
        row_st, row_bits, _ = self.hash_of(lambda j: K.KLoad(self.keys[j].name, p, self.keys[j].dtype), "p")
        xs = {ln.agg: K.KVar(f"x{ln.agg}", ln.dtype) for ln in self.lanes}
        on_new = [*[K.Store(f"tk{j}", slot, K.KLoad(k.name, p, k.dtype)) for j, k in enumerate(self.keys)],
                  K.Store("tcount", slot, K.i64(1)),
                  *[K.Store(f"tv{a}", slot, x) for a, x in xs.items()],
                  *[K.Store(f"tv{a}", slot, K.KLoad(self.values[a].name, p, self.spec.aggs[a].dtype))
                    for a in self.firsts]]
        old = {a: K.KVar(f"o{a}", x.dtype) for a, x in xs.items()}
        on_hit = [K.Store("tcount", slot, K.op("+", K.KLoad("tcount", slot, I64), K.i64(1)))]
        for ln in self.lanes:
            on_hit += [K.Declare(old[ln.agg], K.KLoad(f"tv{ln.agg}", slot, ln.dtype)),
                       K.Store(f"tv{ln.agg}", slot, self.comb(ln, old[ln.agg], xs[ln.agg]))]
        take = (K.Declare(p, K.op("+", r0, i)),
                *row_st,
                *[K.Declare(x, K.KLoad(self.values[a].name, p, x.dtype)) for a, x in xs.items()],
                *self.probe(hh, row_bits, region, "tcount", [f"tk{j}" for j in range(len(self.keys))],
                            on_new, on_hit, slot, "p"),
                K.If(K.op("==", PLACED, K.KConst(False, "bool")), (K.Assign(full, K.i32(1)),)))
        walk = (K.Declare(hh, K.KLoad(SH_H, K.KCast(i, I32), U32)),
                K.If(K.op("==", K.KCast(K.op("%", hh, _u32(BLOCK)), I32), LID), take))
        rnd = (K.Declare(row, K.op("+", r0, K.KCast(LID, I64))),
               K.If(K.op("<", row, stop), (*mine_st, K.Store(SH_H, LID, mine_h))),
               K.Barrier(),
               K.Declare(cnt, K.op("-", stop, r0)),
               K.Comment("Every thread walks the round's rows in order and folds the ones it owns."),
               K.For(i, K.i64(0), K.op("&&", K.op("<", i, cnt), K.op("<", i, K.i64(BLOCK))),
                     K.op("+", i, K.i64(1)), walk),
               K.Barrier())
        per_chunk = (K.Declare(start, K.op("*", chunk, per)),
                     K.Declare(stop, K.KSelect(K.op("<", K.op("+", start, per), N), K.op("+", start, per), N, I64)),
                     K.Declare(region, K.op("+", K.op("*", chunk, K.i64(SLOTS)), K.KCast(K.op("*", LID, K.i32(REGION)), I64))),
                     K.For(z, K.i32(0), K.op("<", z, K.i32(REGION)), K.op("+", z, K.i32(1)),
                           (K.Store("tcount", K.op("+", region, K.KCast(z, I64)), K.i64(0)),)),
                     K.Declare(full, K.i32(0)),
                     K.For(r0, start, K.op("<", r0, stop), K.op("+", r0, K.i64(BLOCK)), rnd),
                     K.Store("tover", K.op("+", K.op("*", chunk, K.i64(BLOCK)), K.KCast(LID, I64)), full))
        body = (K.Comment(f"per: rows of each of the {CHUNKS} logical chunks (a multiple of BLOCK; n alone decides)."),
                K.Declare(per, K.op("*", K.op("/", K.op("+", N, K.i64(CHUNKS * BLOCK - 1)), K.i64(CHUNKS * BLOCK)),
                                    K.i64(BLOCK))),
                K.For(chunk, K.KCast(S.GROUP, I64), K.op("<", chunk, K.i64(CHUNKS)),
                      K.op("+", chunk, K.KCast(K.KThread("num_groups"), I64)), per_chunk))
        args = (*self.keys, *self.values.values(), *self.params, KernelArg("n", "n", I64), *self.tables, self.tover)
        return K.Kernel(self.name("partials"), args, (K.SharedArray(SH_H, U32, BLOCK),), body,
                        doc=f"{self.name('partials')}: every chunk's private table, rows folded in order.")

    def merge(self) -> K.Kernel:
        region, bad, b, i, src, slot, c = (K.KVar("region", I64), K.KVar("bad", I32), K.KVar("b", I64),
                                          K.KVar("i", I32), K.KVar("src", I64), K.KVar("slot", I64), K.KVar("c", I64))
        z, t, tot = K.KVar("z", I32), K.KVar("t", I32), K.KVar("tot", I32)
        keys_st, bits, h = self.hash_of(lambda j: K.KLoad(f"tk{j}", src, self.keys[j].dtype), "m")
        vs = {a: K.KVar(f"v{a}", self.spec.aggs[a].dtype) for a in self.outs}
        on_new = [*[K.Store(g.name, slot, K.KLoad(f"tk{j}", src, g.dtype)) for j, g in enumerate(self.gkeys)],
                  K.Store("gcount", slot, c),
                  *[K.Store(self.outs[a].name, slot, v) for a, v in vs.items()]]
        on_hit = [K.Store("gcount", slot, K.op("+", K.KLoad("gcount", slot, I64), c))]
        for ln in self.lanes:
            o = K.KVar(f"o{ln.agg}", ln.dtype)
            on_hit += [K.Declare(o, K.KLoad(self.outs[ln.agg].name, slot, ln.dtype)),
                       K.Store(self.outs[ln.agg].name, slot, self.comb(ln, o, vs[ln.agg]))]
        take = (*keys_st,
                *[K.Declare(v, K.KLoad(f"tv{a}", src, v.dtype)) for a, v in vs.items()],
                *self.probe(h, bits, region, "gcount", [g.name for g in self.gkeys], on_new, on_hit, slot, "m"),
                K.If(K.op("==", PLACED, K.KConst(False, "bool")), (K.Assign(bad, K.i32(1)),)))
        per_slot = (K.Declare(src, K.op("+", K.op("+", K.op("*", b, K.i64(SLOTS)), K.KCast(K.op("*", LID, K.i32(REGION)), I64)),
                                        K.KCast(i, I64))),
                    K.Declare(c, K.KLoad("tcount", src, I64)),
                    K.If(K.op(">", c, K.i64(0)), take))
        per_chunk = (K.If(K.op("!=", K.KLoad("tover", K.op("+", K.op("*", b, K.i64(BLOCK)), K.KCast(LID, I64)), I32), K.i32(0)),
                          (K.Assign(bad, K.i32(1)),)),
                     K.For(i, K.i32(0), K.op("<", i, K.i32(REGION)), K.op("+", i, K.i32(1)), per_slot))
        fin = []
        for ln in self.lanes:
            if ln.op == "fold":
                f = K.KVar(f"f{ln.agg}", ln.dtype)
                fin += [K.Declare(f, K.KLoad(self.outs[ln.agg].name, slot, ln.dtype)),
                        K.Store(self.outs[ln.agg].name, slot, self.comb.finish(ln, f))]
        body = [K.Declare(region, K.KCast(K.op("*", LID, K.i32(REGION)), I64)),
                K.For(z, K.i32(0), K.op("<", z, K.i32(REGION)), K.op("+", z, K.i32(1)),
                      (K.Store("gcount", K.op("+", region, K.KCast(z, I64)), K.i64(0)),)),
                K.Declare(bad, K.i32(0)),
                K.Comment("Chunks in order: each group's partials combine in one fixed order."),
                K.For(b, K.i64(0), K.op("<", b, K.i64(CHUNKS)), K.op("+", b, K.i64(1)), per_chunk)]
        if fin:
            body.append(K.For(z, K.i32(0), K.op("<", z, K.i32(REGION)), K.op("+", z, K.i32(1)), (
                K.Declare(slot, K.op("+", region, K.KCast(z, I64))),
                K.If(K.op(">", K.KLoad("gcount", slot, I64), K.i64(0)), tuple(fin)))))
        body += [K.Store("sh_bad", LID, bad), K.Barrier(),
                 K.If(K.op("==", LID, K.i32(0)), (
                     K.Declare(tot, K.i32(0)),
                     K.For(t, K.i32(0), K.op("<", t, K.i32(BLOCK)), K.op("+", t, K.i32(1)),
                           (K.Assign(tot, K.op("|", tot, K.KLoad("sh_bad", t, I32))),)),
                     K.Store("gcount", K.i64(SLOTS), K.KSelect(K.op("!=", tot, K.i32(0)), K.i64(-1), K.i64(0), I64))))]
        args = (*self.params, KernelArg("n", "n", I64), *self.tables, self.tover,
                *self.gkeys, *self.outs.values(), self.counts)
        return K.Kernel(self.name("merge"), args, (K.SharedArray("sh_bad", I32, BLOCK),), tuple(body),
                        doc=f"{self.name('merge')}: the chunks' tables merged in chunk order; seeds; overflow.")


PLACED = K.KVar("placed", "bool")


def render_group_table(spec: GroupSpec, dialect: str, index_dtype: str = "int32") -> KernelSet:
    """The two kernels of spec's low-cardinality group_by in `dialect` (see the module
    docstring for inputs and outputs)."""
    pr = printer(dialect)
    for d in [a.dtype for a in spec.aggs] + [p.dtype for p in spec.params]:
        pr.check(d)
    lo = _Lower(spec, index_dtype)
    kernels = [lo.partials(), lo.merge()]
    header = (f"// querycompute column operation {spec.name}: {SHAPE}, 2 kernels, {dialect}\n"
              f"// compile options: {' '.join(pr.OPTIONS) or '(none)'}")
    specs = (KernelSpec(kernels[0].name, kernels[0].args, "reduce", "any", "partials"),
             KernelSpec(kernels[1].name, kernels[1].args, "one", "any", "merge"))
    size = str(SLOTS + 1)
    outputs = ([BufferSpec(a.name, a.dtype, size) for a in lo.gkeys]
               + [BufferSpec(a.name, a.dtype, size) for a in lo.outs.values()] + [BufferSpec("gcount", I64, size)])
    scratch = [BufferSpec(a.scratch, a.dtype, str(CHUNKS * SLOTS)) for a in lo.tables]
    scratch.append(BufferSpec("tover", I32, str(CHUNKS * BLOCK)))
    return KernelSet(dialect=dialect, pass_name=spec.name, shape=SHAPE, source=pr.render(kernels, header),
                     options=pr.OPTIONS, kernels=specs, outputs=tuple(outputs), scratch=tuple(scratch),
                     block=BLOCK, elems_per_thread=S.EPT)


def bytes_per_element(spec: GroupSpec) -> list[tuple[str, int]]:
    """(kernel, bytes read per row): the partials read every key and value once, plus the
    row's 4-byte hash through shared memory; the tables and the merge are O(CHUNKS * SLOTS)."""
    keys = sum(order_keys.bits_width(d) // 8 for d in spec.key_dtypes)
    values = sum(G.value_size(a.dtype) for a in spec.aggs if a.op != "count")
    return [(f"{spec.name}_table_partials", keys + values)]


def describe(spec: GroupSpec) -> str:
    per = bytes_per_element(spec)[0][1]
    return (f"group_by of ({', '.join(spec.key_dtypes)}), <= {MAX_GROUPS} groups: per-chunk private hash "
            f"tables ({CHUNKS} x {SLOTS} slots) merged in chunk order, {per} B per row "
            f"(more groups: the sort path)")


def worth_trying(spec: GroupSpec) -> bool:
    """Whether the tables run before the sort path: when the sort needs more than
    MAX_CHEAP_PASSES radix passes (one per key byte). Measured on pocl (docs/performance.md):
    two uint8 keys (2 passes) sort 3x faster than the tables at 4 groups; one int32 key (4
    passes): a tie at 4 groups, the tables 1.6x faster at 256 and 4000 groups."""
    return len(passes(sort_spec(spec))) > MAX_CHEAP_PASSES


def explain_lines(spec: GroupSpec) -> list[str]:
    """explain()'s lines for the low-cardinality path (tried before the sort path)."""
    rows = bytes_per_element(spec)
    if not worth_trying(spec):
        return [f"not tried (keys of at most 2 bytes: the radix sort is cheaper): {describe(spec)}"]
    return ([f"tried first: {describe(spec)}"] + [f"  {name}: {b} B per element" for name, b in rows]
            + [f"  {spec.name}_table_merge: one block, {CHUNKS} x {SLOTS} slots per call (independent of n)"])
