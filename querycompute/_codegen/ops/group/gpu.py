"""GPU column operation "group_by": sort-based grouping of GroupSpec key columns with a
deterministic segmented reduction of every GroupAgg (ir/stage_specs.py), as one launch.KernelSet
of shape "group" for CUDA, OpenCL and Metal, run by the launch loop every GPU runtime shares.

Inputs: the key columns bound as their order_keys.bits_dtype (0..m-1), then the value column
of every aggregate except count, of the aggregate's dtype; params follow spec.params.
Outputs (n slots each; scratch "total" says how many groups G there are, so the launch loop
reads back the first G): the group keys (raw key bits of the group's first row), one column
per non-count aggregate, and the int64 row count of every group (a count aggregate is that
column, copied by the host).

Steps (launch.Step schedule):
  1. sort: ops/sort/gpu.py's stable LSD radix sort of all keys ascending, its permutation kept
     on the device (scratch perm_a): groups come out in key order (NaN last), and within a
     group rows stay in source order, so the group's first sorted row is its first row.
  2. `<name>_group_partials` (one block per tile of TILE = BLOCK * EPT sorted positions;
     thread t owns the EPT consecutive positions t * EPT..): a position is a head (starts a
     group) when it is 0 or its row's key order bits differ from the previous position's
     (all NaNs one group, -0.0 == 0.0); heads[s] is stored. Each thread folds its rows'
     values per lane (ops/group/ir.py: one lane per folding aggregate plus the count), restarting
     at a head; a segmented block scan gives the tile's pair (did it have a head, fold of its
     rows after its last head): tile_v<lane>[tile]; tile_heads[tile] = heads in the tile.
  3. `<name>_group_scan` (one block): over the tiles in order, a BLOCK-sized chunk at a
     time with a running carry: tile_heads becomes its exclusive prefix sum (the group id of
     the tile's first head) and tile_v<lane> the fold of the open group before the tile
     (rows since the last head in an earlier tile).
  4. `<name>_group_downsweep` (tiles again): the thread folds and the segmented block scan
     again (same grouping, same values); a thread's running fold starts from the tile's carry
     continued by the threads before it, then takes its rows in order: at a head the group
     id steps and the fold restarts (the group's key columns and `first` values are written
     there), at a group's last row (the next position is a head, or it is n - 1) every
     lane's result goes out (a fold's seed combined in front once); the row at n - 1 writes
     total = G.
Determinism: every grouping (thread runs, block scan steps, tile order) depends only on n
and the data, never on timing or on how many blocks run at once: float sums are identical
run to run, and equal np.add.reduceat's within rounding (both sum the same values in
source order, grouped differently). No atomics.

Bytes per element (`bytes_per_element`): the sort's passes, then partials reads the index,
the key bits (at the permutation) and every lane's value and writes a head flag; downsweep
reads the index, the flags and the values again, and writes per group the key, every
result and the count.
"""
from __future__ import annotations

from dataclasses import replace

from ...ir import kernel_ir as K
from ... import order_keys
from ...dialects.by_name import printer
from ...launch import BufferSpec, KernelArg, KernelSet, Step
from ...lower.block import LID, block_inclusive_scan
from ...lower.element import check_name
from ...ir.stage_specs import GroupSpec, SortSpec
from . import ir as G
from ..sort import gpu as sort_op
from ..sort import ir as S
from .ir import I32, I64, VALID
from ..sort.ir import BLOCK, EPT, TILE

__all__ = ["SHAPE", "render_group", "bytes_per_element", "sort_spec"]

SHAPE = "group"
N = K.KVar("n", I64)
BASE = K.KVar("base", I64)
TILE_NO = K.KVar("tile", I64)
HC = K.KVar("hc", I32)              # heads among this thread's rows
SH_H = "sh_heads"                   # int32[BLOCK]: block scan of the head counts
SH_C = "sh_count"                   # int64[BLOCK]: scan of the tiles' head counts
HEADS, TILE_HEADS, PERM, TOTAL = "heads", "tile_heads", "perm_a", "total"


def sort_spec(spec: GroupSpec) -> SortSpec:
    return SortSpec(spec.key_dtypes, (False,) * len(spec.key_dtypes), spec.name)


class _Lower:
    """The three group kernels of one GroupSpec (see the module docstring)."""

    def __init__(self, spec: GroupSpec, index_dtype: str):
        check_name(spec.name, "group_by")
        self.spec, self.idx = spec, index_dtype
        self.lanes = G.lanes(spec)
        self.comb = G.Combiner(spec)
        m = len(spec.key_dtypes)
        self.keys = [sort_op.key_arg(sort_spec(spec), j) for j in range(m)]
        self.values, self.outs, self.gkeys, self.counts, self.params = G.result_args(spec, self.keys)
        self.perm = KernelArg(PERM, "scratch", index_dtype, scratch=PERM)
        self.scratch = {nm: KernelArg(nm, "scratch", dt, scratch=nm) for nm, dt in
                        [(HEADS, "bool"), (TILE_HEADS, I64), (TOTAL, I64)]
                        + [(ln.tile, ln.dtype) for ln in self.lanes]}

    def name(self, suffix: str) -> str:
        return f"{self.spec.name}_group_{suffix}"

    def value(self, lane: G.Lane, p) -> K.KExpr:
        if lane.agg is None:
            return K.i64(1)
        return K.KLoad(self.values[lane.agg].name, p, lane.dtype)

    # ---- per thread ------------------------------------------------------------------------
    def thread_fold(self, head_of, prelude: list = ()) -> list:
        """Declares tile, base, valid, hc and acc<lane>: this thread's EPT consecutive sorted
        positions folded in order, restarting at heads. head_of(s, p) -> (statements, the
        head flag, statements after it) for position s (row p); `prelude` runs before the loop."""
        s, p, k, h = K.KVar("s", I64), K.KVar("p", I64), K.KVar("k", I32), K.KVar("h", "bool")
        xs = [ln.var("x") for ln in self.lanes]
        before, head, after = head_of(s, p)
        body = (K.Declare(s, K.op("+", BASE, K.KCast(k, I64))),
                K.If(K.op(">=", s, N), (K.Break(),)),
                K.Declare(p, K.KCast(K.KLoad(PERM, s, self.idx), I64)),
                *before,
                K.Declare(h, head),
                *after,
                K.Assign(HC, K.op("+", HC, K.KCast(h, I32))),
                *[K.Declare(x, self.value(ln, p)) for x, ln in zip(xs, self.lanes)],
                G.fold_in(self.lanes, self.comb, K.op("||", h, K.op("==", k, K.i32(0))), xs))
        return [K.Declare(TILE_NO, K.KCast(S.GROUP, I64)),
                K.Declare(BASE, K.op("+", K.op("*", TILE_NO, K.i64(TILE)), K.KCast(K.op("*", LID, K.i32(EPT)), I64))),
                K.Declare(VALID, K.op("<", BASE, N)),
                K.Declare(HC, K.i32(0)),
                *[K.Declare(ln.var("acc"), ln.zero()) for ln in self.lanes],
                *prelude,
                K.Comment(f"This thread's {EPT} consecutive sorted positions, folded in order (restart at heads)."),
                K.For(k, K.i32(0), K.op("<", k, K.i32(EPT)), K.op("+", k, K.i32(1)), body, unroll=True)]

    def _prev(self, j: int) -> K.KVar:
        return K.KVar(f"kprev{j}", order_keys.register_type(self.spec.key_dtypes[j]))

    def key_heads(self, s, p) -> tuple[list, K.KExpr, list]:
        """A head: position 0, or the key bits differ from the previous position's (kept in
        kprev<j>); heads[s] stored."""
        stmts, after, differ = [], [K.Store(HEADS, s, K.KVar("h", "bool"))], K.op("==", s, K.i64(0))
        for j, d in enumerate(self.spec.key_dtypes):
            bits, t = order_keys.ir_bits(d, False, K.KLoad(self.keys[j].name, p, self.keys[j].dtype), f"t{j}")
            stmts += bits
            differ = K.op("||", differ, K.op("!=", t, self._prev(j)))
            after.append(K.Assign(self._prev(j), t))
        return stmts, differ, after

    def prev_bits(self) -> list:
        """kprev<j>: the key bits of the position before the thread's first (none for 0)."""
        q, load = K.KVar("q", I64), []
        for j, d in enumerate(self.spec.key_dtypes):
            bits, t = order_keys.ir_bits(d, False, K.KLoad(self.keys[j].name, q, self.keys[j].dtype), f"u{j}")
            load += [*bits, K.Assign(self._prev(j), t)]
        return ([K.Declare(self._prev(j), K.KConst(0, self._prev(j).dtype)) for j in range(len(self.keys))]
                + [K.If(K.op("&&", VALID, K.op(">", BASE, K.i64(0))), (
                    K.Declare(q, K.KCast(K.KLoad(PERM, K.op("-", BASE, K.i64(1)), self.idx), I64)), *load))])

    # ---- kernels -----------------------------------------------------------------------------
    def partials(self) -> K.Kernel:
        incl, tail = K.KVar("incl", I32), K.KVar("last", I64)
        left = K.op("-", N, K.op("*", TILE_NO, K.i64(TILE)))
        rows = K.KSelect(K.op("<", left, K.i64(TILE)), left, K.i64(TILE), I64)
        body = [*self.thread_fold(self.key_heads, self.prev_bits()),
                *G.segmented_scan(self.lanes, self.comb, K.op(">", HC, K.i32(0))),
                *block_inclusive_scan(HC, incl, SH_H),
                K.If(K.op("==", LID, K.i32(0)), (
                    K.Comment("The tile's pair: held by its last thread with rows."),
                    K.Declare(tail, K.op("-", K.op("/", K.op("+", rows, K.i64(EPT - 1)), K.i64(EPT)), K.i64(1))),
                    K.Store(TILE_HEADS, TILE_NO, K.KCast(K.KLoad(SH_H, K.i32(BLOCK - 1), I32), I64)),
                    *[K.Store(ln.tile, TILE_NO, K.KLoad(ln.shared, tail, ln.dtype)) for ln in self.lanes]))]
        args = (*self.keys, *self._value_args(), *self.params, KernelArg("n", "n", I64), self.perm,
                self.scratch[HEADS], self.scratch[TILE_HEADS], *[self.scratch[ln.tile] for ln in self.lanes])
        return K.Kernel(self.name("partials"), args, self._shared(K.SharedArray(SH_H, I32, BLOCK)), tuple(body),
                        doc=f"{self.name('partials')}: head flags and every tile's (head count, open fold).")

    def scan(self) -> K.Kernel:
        tiles, chunk, j = K.KVar("tiles", I64), K.KVar("chunk", I64), K.KVar("j", I64)
        c, incl, gc = K.KVar("c", I64), K.KVar("incl", I64), K.KVar("gcarry", I64)
        tail, lf = K.KVar("last", I32), K.KVar("lflag", I32)
        carry = [ln.var("carry") for ln in self.lanes]
        lastv = [ln.var("lastv") for ln in self.lanes]
        before = [ln.var("before") for ln in self.lanes]
        body = (K.Declare(j, K.op("+", chunk, K.KCast(LID, I64))),
                K.Declare(VALID, K.op("<", j, tiles)),
                K.Declare(c, K.KSelect(VALID, K.KLoad(TILE_HEADS, j, I64), K.i64(0), I64)),
                *[K.Declare(ln.var("acc"), K.KSelect(VALID, K.KLoad(ln.tile, j, ln.dtype), ln.zero(), ln.dtype))
                  for ln in self.lanes],
                *G.segmented_scan(self.lanes, self.comb, K.op(">", c, K.i64(0))),
                *block_inclusive_scan(c, incl, SH_C),
                *G.exclusive_prefix(self.lanes, self.comb, "before", carry),
                K.If(VALID, (K.Store(TILE_HEADS, j, K.op("-", K.op("+", gc, incl), c)),
                             *[K.Store(ln.tile, j, b) for ln, b in zip(self.lanes, before)])),
                K.Comment("The carry into the next chunk: this chunk's last tile's pair continues it."),
                K.Declare(tail, K.KCast(K.op("-", K.KSelect(K.op("<", K.op("-", tiles, chunk), K.i64(BLOCK)),
                                                            K.op("-", tiles, chunk), K.i64(BLOCK), I64), K.i64(1)), I32)),
                K.Declare(lf, K.KLoad(G.SH_F, tail, I32)),
                *[K.Declare(v, K.KLoad(ln.shared, tail, ln.dtype)) for v, ln in zip(lastv, self.lanes)],
                K.If(K.op("!=", lf, K.i32(0)), tuple(K.Assign(cv, v) for cv, v in zip(carry, lastv)),
                     tuple(K.Assign(cv, self.comb(ln, cv, v)) for cv, v, ln in zip(carry, lastv, self.lanes))),
                K.Assign(gc, K.op("+", gc, K.KLoad(SH_C, K.i32(BLOCK - 1), I64))),
                K.Barrier())
        stmts = (K.Declare(tiles, K.op("/", K.op("+", N, K.i64(TILE - 1)), K.i64(TILE))),
                 K.Declare(gc, K.i64(0)),
                 K.Comment("carry: the open group's fold before the chunk (tile 0 starts with a head,\n"
                           "so the zero it starts as is never combined)"),
                 *[K.Declare(cv, ln.zero()) for cv, ln in zip(carry, self.lanes)],
                 K.For(chunk, K.i64(0), K.op("<", chunk, tiles), K.op("+", chunk, K.i64(BLOCK)), body))
        args = (*self.params, KernelArg("n", "n", I64), self.scratch[TILE_HEADS],
                *[self.scratch[ln.tile] for ln in self.lanes])
        return K.Kernel(self.name("scan"), args, self._shared(K.SharedArray(SH_C, I64, BLOCK)), stmts,
                        doc=f"{self.name('scan')} (one block): every tile's first group id and open-group carry.")

    def downsweep(self) -> K.Kernel:
        heads = lambda s, p: ([], K.KLoad(HEADS, s, "bool"), [])  # noqa: E731
        fold = self.thread_fold(heads)
        incl, gid = K.KVar("incl", I32), K.KVar("gid", I64)
        s, p, k, h, end = K.KVar("s", I64), K.KVar("p", I64), K.KVar("k", I32), K.KVar("h", "bool"), K.KVar("end", "bool")
        run = [ln.var("run") for ln in self.lanes]
        xs = [ln.var("x") for ln in self.lanes]
        at_head = [K.Assign(gid, K.op("+", gid, K.i64(1))),
                   *[K.Assign(r, x) for r, x in zip(run, xs)],
                   *[K.Store(o.name, gid, K.KLoad(kk.name, p, kk.dtype)) for o, kk in zip(self.gkeys, self.keys)],
                   *[K.Store(self.outs[a].name, gid, K.KLoad(self.values[a].name, p, agg.dtype))
                     for a, agg in enumerate(self.spec.aggs) if agg.op == "first"]]
        results = [K.Store(self.counts.name, gid, run[0])]
        results += [K.Store(self.outs[ln.agg].name, gid, self.comb.finish(ln, r)) for ln, r in zip(self.lanes[1:], run[1:])]
        nxt = K.op("+", s, K.i64(1))
        loop = (K.Declare(s, K.op("+", BASE, K.KCast(k, I64))),
                K.If(K.op(">=", s, N), (K.Break(),)),
                K.Declare(p, K.KCast(K.KLoad(PERM, s, self.idx), I64)),
                K.Declare(h, K.KLoad(HEADS, s, "bool")),
                *[K.Declare(x, self.value(ln, p)) for x, ln in zip(xs, self.lanes)],
                K.If(h, tuple(at_head), tuple(K.Assign(r, self.comb(ln, r, x)) for r, x, ln in zip(run, xs, self.lanes))),
                K.Declare(end, K.KSelect(K.op("<", nxt, N), K.KLoad(HEADS, nxt, "bool"), K.KConst(True, "bool"), "bool")),
                K.If(end, (*results, K.If(K.op("==", nxt, N), (K.Store(TOTAL, K.i32(0), K.op("+", gid, K.i64(1))),)))))
        body = [*fold,
                *G.segmented_scan(self.lanes, self.comb, K.op(">", HC, K.i32(0))),
                *block_inclusive_scan(HC, incl, SH_H),
                K.Comment("The group open before this thread's first row: its id and its fold so far."),
                K.Declare(gid, K.op("-", K.op("+", K.KLoad(TILE_HEADS, TILE_NO, I64), K.KCast(K.op("-", incl, HC), I64)),
                                    K.i64(1))),
                *G.exclusive_prefix(self.lanes, self.comb, "run",
                                    [K.KLoad(ln.tile, TILE_NO, ln.dtype) for ln in self.lanes]),
                K.For(k, K.i32(0), K.op("<", k, K.i32(EPT)), K.op("+", k, K.i32(1)), loop, unroll=True)]
        args = (*self.keys, *self._value_args(), *self.params, KernelArg("n", "n", I64), self.perm,
                self.scratch[HEADS], self.scratch[TILE_HEADS], *[self.scratch[ln.tile] for ln in self.lanes],
                self.scratch[TOTAL], *self.gkeys, *self.outs.values(), self.counts)
        return K.Kernel(self.name("downsweep"), args, self._shared(K.SharedArray(SH_H, I32, BLOCK)), tuple(body),
                        doc=f"{self.name('downsweep')}: every group's keys, results and count, at its rows.")

    def _value_args(self) -> list:
        return list(self.values.values())

    def _shared(self, extra: K.SharedArray) -> tuple:
        return (*G.shared_arrays(self.lanes), extra)


def _perm_scratch(k: K.Kernel, perm: KernelArg) -> K.Kernel:
    """A sort kernel whose permutation output is this set's scratch perm_a."""
    return replace(k, args=tuple(perm if a.name == PERM else a for a in k.args))


def render_group(spec: GroupSpec, dialect: str, index_dtype: str = "int32") -> KernelSet:
    """Every kernel of spec's group_by in `dialect`, with its launch schedule (see the module
    docstring for inputs, outputs and steps)."""
    pr = printer(dialect)
    for d in [a.dtype for a in spec.aggs] + [p.dtype for p in spec.params]:
        pr.check(d)
    lo = _Lower(spec, index_dtype)
    sort_kernels, schedule = sort_op.render_kernels(sort_spec(spec), index_dtype, False, dialect)
    kernels = [_perm_scratch(k, lo.perm) for k in sort_kernels] + [lo.partials(), lo.scan(), lo.downsweep()]
    schedule = list(schedule) + [Step(lo.name("partials")), Step(lo.name("scan")), Step(lo.name("downsweep"))]
    outputs = ([BufferSpec(a.name, a.dtype, "n") for a in lo.gkeys]
               + [BufferSpec(a.name, a.dtype, "n") for a in lo.outs.values()] + [BufferSpec(lo.counts.name, I64, "n")])
    sizes = {sort_op.COUNTS: f"tiles*{S.RADIX}", sort_op.COUNTS_B: f"tiles*{S.RADIX}",
             TILE_HEADS: "tiles*1", TOTAL: "one"}
    sizes.update({ln.tile: "tiles*1" for ln in lo.lanes})
    scratch = {}
    for k in kernels:
        for a in k.args:
            if a.kind == "scratch":
                scratch[a.scratch] = BufferSpec(a.scratch, a.dtype, sizes.get(a.scratch, "n"))
    return sort_op.kernel_set(kernels, schedule, dialect, spec.name, SHAPE, outputs, list(scratch.values()))


def bytes_per_element(spec: GroupSpec, index_dtype: str = "int32", dialect: str = "") -> list[tuple[str, int]]:
    """(kernel, bytes read + written per row) of the launches that touch every row, in order;
    the downsweep's writes are per group (at most one group per row)."""
    idx = 4 if index_dtype == "int32" else 8
    keys = sum(order_keys.bits_width(d) // 8 for d in spec.key_dtypes)
    lanes = G.lanes(spec)
    values = sum(G.value_size(ln.dtype) for ln in lanes[1:])
    firsts = sum(G.value_size(a.dtype) for a in spec.aggs if a.op == "first")
    outs = sum(G.value_size(a.dtype) for a in spec.aggs if a.op != "count")
    name = f"{spec.name}_group"
    return (sort_op.bytes_per_element(sort_spec(spec), index_dtype, dialect=dialect)
            + [(f"{name}_partials", idx + keys + values + 1),
               (f"{name}_downsweep", idx + 2 + values + firsts),
               (f"{name}_downsweep (writes, per group)", keys + outs + 8)])


def describe(spec: GroupSpec, index_dtype: str = "int32") -> str:
    total = sum(b for _, b in bytes_per_element(spec, index_dtype))
    return (f"group_by of ({', '.join(spec.key_dtypes)}): radix sort + head flags + segmented "
            f"reduce-then-scan of {len(spec.aggs)} aggregates, at most {total} B per row")
