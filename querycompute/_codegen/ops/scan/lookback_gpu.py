"""The CUDA scan's single pass with a look-back (ops/scan/gpu.py holds the tiles, steps 1-3 and
the reduce-then-scan of the other dialects; `_Lower` there inherits LookBack).

CUDA: single pass with a look-back (Merrill & Garland), after a tiny init kernel:
  <name>_scan_init       (one block) zeroes the status flags and the tile ticket
  <name>_scan_lookback   (tiles) a block takes its tile from an atomic ticket (tiles are
      handed out in the order blocks start, so every tile below a block's own belongs to a
      block that is already running and never waits on it: no deadlock, whatever order the
      hardware starts blocks in); steps 1-2; publishes its aggregate (flag 1); its carry is
      the inclusive prefix of the last tile of the previous look-back group of LOOKBACK tiles
      (flag 2, published by that tile) folded with the aggregates of the tiles of its own
      group before it, which warp 0 reads one per lane and folds with an ordered shuffle
      tree; the last tile of each group publishes its inclusive prefix; step 3.
  Memory order: a value is published as volatile store of the value, __threadfence(),
  volatile store of the flag (release); a reader spins on a volatile load of the flag,
  then __threadfence(), then a volatile load of the value (acquire). Volatile accesses are
  never cached in registers or the SM's non-coherent L1; the fences keep value and flag in
  order as other blocks see them.
  The look-back is *fixed*: a group's aggregates are always folded the same way, whatever
  was published first (plain look-back stops at the first inclusive prefix it finds, which
  changes float bits from run to run). The inclusive prefixes chain once per group, and that
  chain is the kernel's speed limit (about 6 us a hop on an H100, docs/performance.md).
  Where the combine is *exact* (exact_combine: integer add / multiply, min, max and bit
  operations of acc and item, where any grouping gives the same bits), the look-back is
  CUB's *decoupled* one instead, which never waits on an inclusive prefix: tile 0 publishes
  its inclusive prefix at once, every other tile its aggregate; then warp 0 reads the flags
  of the 32 tiles before its window end (one per lane, spinning only while a tile has
  published nothing), folds the window nearest-last with a segmented shuffle tree (a lane
  holding an inclusive prefix discards everything before it), and moves the window 32 tiles
  back until a window held an inclusive prefix; the tile then publishes its own. Correct on
  an H100 from n = 1 to 1e8 and 17% faster than the fixed look-back on int32 (1.73 against
  2.09 ms at 1e8).
  The CPU harness runs blocks one after another in ticket order, so there every flag a
  block waits for is already set: the look-back runs (and is tested) without spinning, and
  the decoupled one finds an inclusive prefix in its first window; its walk back over
  windows of aggregates has run on a GPU only (benchmarks/gpu_scan_compaction.py).
"""
from __future__ import annotations

from ... import dtypes as D
from ...ir import expr as E
from ...ir import kernel_ir as K
from ...launch import BLOCK
from ...lower.block import LANE, LID, WARP
from ...ir.stage_specs import ScanSpec
from .names import NUM_BLOCKS, SH, TILE, as_i64 as _i64

FLAG_AGG, FLAG_INCL = K.KConst(1, "uint32"), K.KConst(2, "uint32")
# shuffles move 32- and 64-bit values: narrower ones travel as int32
_SHUFFLE_AS = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "int32", "uint16": "int32"}
def _shuffle_down(v, off, dtype: str) -> K.KExpr:
    """v of the lane `off` lanes above; narrow values travel as int32 (_SHUFFLE_AS)."""
    wire = _SHUFFLE_AS.get(dtype)
    return K.KCast(K.KShuffleDown(K.KCast(v, wire), off, wire), dtype) if wire else K.KShuffleDown(v, off, dtype)


# Combines whose every grouping gives the same bits: integer wrapping add and multiply,
# min / max and the bit operations of acc and item (and bool and / or).
_EXACT_OPS = ("add", "mul", "min", "max", "bitand", "bitor", "bitxor", "and", "or")


def exact_combine(spec: ScanSpec) -> bool:
    """Does any order of combining give the same result (so the look-back need not be fixed)?"""
    c = spec.combine
    while isinstance(c, E.Cast) and c.dtype == spec.dtype:
        c = c.x
    names = {getattr(c, "a", None), getattr(c, "b", None)}
    return (not D.is_float(spec.dtype) and isinstance(c, E.Binary) and c.op in _EXACT_OPS
            and names == {E.Var("acc", spec.dtype), E.Var("item", spec.dtype)})


class LookBack:
    """The look-back kernels of a scan's `_Lower` (it supplies var, combine, zero, seed,
    args, kernel and the per-tile steps)."""

    def init(self) -> K.Kernel:
        j = K.KVar("j", "int64")
        body = [K.For(j, _i64(LID), K.op("<", j, NUM_BLOCKS), K.op("+", j, K.i64(BLOCK)),
                      (K.Store("block_flags", j, K.KConst(0, "uint32")),)),
                K.If(K.op("==", LID, K.i32(0)), (K.Store("ticket", K.i32(0), K.KConst(0, "uint32")),))]
        return self.kernel("init", self.args("num_blocks", "block_flags", "ticket"), body,
                           f"{self.spec.name} scan: no tile published yet, tickets from 0.", shared=())

    def lookback(self, group: int) -> K.Kernel:
        t = K.KVar("ticket_no", "uint32")
        take = [K.Comment("Tiles go to blocks in the order they start (an atomic ticket), so every earlier\n"
                          "tile belongs to a running block: waiting on it cannot deadlock."),
                K.If(K.op("==", LID, K.i32(0)), (K.Declare(t, K.KConst(0, "uint32")),
                                                  K.AtomicAdd(t, "ticket", K.i32(0), K.KConst(1, "uint32")),
                                                  K.Store("sh_tile", K.i32(0), t))),
                K.Barrier()]
        body = (take + self.tile_start(_i64(K.KLoad("sh_tile", K.i32(0), "uint32"))) + self.thread_fold()
                + self.block_scan(self.var("tacc")) + self.look_back(group) + [K.Barrier()]
                + self.downsweep(K.KLoad("sh_carry", K.i32(0), self.dtype)))
        return self.kernel("lookback", self.args("in", "params", "n", "block_aggs", "block_incl", "block_flags",
                                                   "ticket", "out"), body,
                             f"{self.spec.name} scan, single pass: look back at the tiles before this one.",
                             shared=(SH, "sh_tile", "sh_carry", "sh_state"))

    def _spin(self, at: K.KExpr, op: str, flag: K.KConst) -> list:
        """Spin while `block_flags[at] op flag`, then fence (acquire)."""
        f = K.KVar("flag", "uint32")
        load = K.KLoad("block_flags", at, "uint32", volatile=True)
        return [K.For(f, load, K.op(op, f, flag), load, ()), K.Fence()]

    def _publish(self, buf: str, value, flag: K.KConst) -> list:
        """Value, fence, flag (release): a block that sees the flag sees the value."""
        return [K.Store(buf, TILE, value, volatile=True), K.Fence(), K.Store("block_flags", TILE, flag, volatile=True)]

    def look_back(self, group: int, tile_agg: K.KExpr | None = None) -> list:
        """The carry of tile TILE -> sh_carry[0]: the decoupled look-back where the combine is
        exact (exact_combine: any grouping gives the same bits), else the fixed one."""
        if exact_combine(self.spec):
            return self._look_back_decoupled(tile_agg)
        return self._look_back(group, tile_agg)

    def _look_back_decoupled(self, tile_agg: K.KExpr | None = None) -> list:
        """CUB's decoupled look-back (every thread runs it; warp 0 reads): see the module
        docstring. `tile_agg`: the tile's fold (default: the block scan's last valid slot)."""
        agg, v, o, carry = (self.var(nm) for nm in ("agg", "v", "other", "carry"))
        inc, o_inc, it = K.KVar("has_incl", "int32"), K.KVar("other_incl", "int32"), K.KVar("round", "int32")
        end, j, f = K.KVar("window_end", "int64"), K.KVar("j", "int64"), K.KVar("flag_j", "uint32")
        off = K.KVar("offset", "int32")
        state = K.KLoad("sh_state", K.i32(0), "int32")
        # lane l holds (fold of its segment, whether the segment starts at an inclusive prefix);
        # the lower segment's pair combined with the higher one's: the higher one alone when
        # it holds an inclusive prefix (everything before it is already in that prefix)
        tree = K.For(off, K.i32(1), K.op("<", off, K.i32(32)), K.op("<<", off, K.i32(1)), (
            K.Declare(o, _shuffle_down(v, off, self.dtype)),
            K.Declare(o_inc, K.KShuffleDown(inc, off, "int32")),
            K.If(K.op("==", K.op("%", LANE, K.op("*", off, K.i32(2))), K.i32(0)), (
                K.If(K.op("!=", o_inc, K.i32(0)), (K.Assign(v, o), K.Assign(inc, K.i32(1))),
                     (K.Assign(v, self.combine(v, o)),)),))))
        read = [K.Declare(j, K.op("+", K.op("-", end, K.i64(32)), _i64(LANE))),
                K.Declare(v, self.zero()),
                K.Declare(inc, K.i32(0)),
                K.If(K.op(">=", j, K.i64(0)), (
                    *self._spin(j, "==", K.KConst(0, "uint32")),
                    K.Declare(f, K.KLoad("block_flags", j, "uint32", volatile=True)),
                    K.Fence(),         # the value read after the flag that says which one is set
                    K.If(K.op("==", f, FLAG_INCL),
                         (K.Assign(v, K.KLoad("block_incl", j, self.dtype, volatile=True)), K.Assign(inc, K.i32(1))),
                         (K.Assign(v, K.KLoad("block_aggs", j, self.dtype, volatile=True)),)))),
                tree,
                K.If(K.op("==", LANE, K.i32(0)), (
                    K.Assign(carry, K.KSelect(K.op("==", it, K.i32(0)), v, self.combine(v, carry), self.dtype)),
                    K.If(K.op("!=", inc, K.i32(0)), (K.Store("sh_state", K.i32(0), K.i32(1)),)))),
                K.Assign(end, K.op("-", end, K.i64(32)))]
        first = K.op("==", TILE, K.i64(0))
        return [
            K.Declare(agg, K.KLoad(SH, self.last_thread(), self.dtype) if tile_agg is None else tile_agg),
            K.Declare(carry, self.seed()),
            K.Declare(end, TILE),
            K.Comment("Tile 0 publishes its inclusive prefix at once, every other tile its aggregate;\n"
                      "then warp 0 folds the windows of 32 tiles before this one, nearest first, until\n"
                      "a window holds an inclusive prefix. It never waits for one: only for aggregates,\n"
                      "which every earlier (running) tile publishes before it looks back itself."),
            K.If(K.op("==", LID, K.i32(0)), (
                K.If(first, (*self._publish("block_incl", self.combine(carry, agg), FLAG_INCL),
                             K.Store("sh_state", K.i32(0), K.i32(1))),
                     (*self._publish("block_aggs", agg, FLAG_AGG), K.Store("sh_state", K.i32(0), K.i32(0)))),)),
            K.Barrier(),
            K.For(it, K.i32(0), K.op("==", state, K.i32(0)), K.op("+", it, K.i32(1)), (
                K.Barrier(),           # every thread has read sh_state before lane 0 may set it
                K.If(K.op("==", WARP, K.i32(0)), tuple(read)),
                K.Barrier())),
            K.If(K.op("==", LID, K.i32(0)), (
                K.If(K.op("!=", TILE, K.i64(0)),
                     tuple(self._publish("block_incl", self.combine(carry, agg), FLAG_INCL))),
                K.Store("sh_carry", K.i32(0), carry)))]

    def _look_back(self, group: int, tile_agg: K.KExpr | None = None) -> list:
        """Warp 0 finds the carry of tile TILE -> sh_carry[0]; `tile_agg`: the tile's fold
        (default: the block scan's last valid slot)."""
        agg, v, o, carry, incl = (self.var(nm) for nm in ("agg", "v", "other", "carry", "incl"))
        g0, count, j = (K.KVar(nm, "int64") for nm in ("group_start", "count", "j"))
        off = K.KVar("offset", "int32")
        lane = _i64(LANE)
        tree = K.For(off, K.i32(1), K.op("<", off, K.i32(32)), K.op("<<", off, K.i32(1)), (
            K.Declare(o, _shuffle_down(v, off, self.dtype)),
            K.If(K.op("&&", K.op("==", K.op("%", LANE, K.op("*", off, K.i32(2))), K.i32(0)),
                      K.op("<", K.op("+", lane, _i64(off)), count)),
                 (K.Assign(v, self.combine(v, o)),))))
        warp0 = [
            K.Declare(agg, K.KLoad(SH, self.last_thread(), self.dtype) if tile_agg is None else tile_agg),
            K.If(K.op("==", LID, K.i32(0)), tuple(self._publish("block_aggs", agg, FLAG_AGG))),
            K.Comment(f"Fixed look-back: the tiles of this tile's group of {group} before it, one per lane,\n"
                      "folded in order by a shuffle tree; in front of them the inclusive prefix of the\n"
                      "previous group's last tile (the seed for the first group)."),
            K.Declare(g0, K.op("*", K.op("/", TILE, K.i64(group)), K.i64(group))),
            K.Declare(count, K.op("-", TILE, g0)),
            K.Declare(v, self.zero()),
            K.If(K.op("<", lane, count), (
                K.Declare(j, K.op("+", g0, lane)),
                *self._spin(j, "==", K.KConst(0, "uint32")),
                K.Assign(v, K.KLoad("block_aggs", j, self.dtype, volatile=True)))),
            tree,
            K.If(K.op("==", LID, K.i32(0)), (
                K.Declare(carry, self.seed()),
                K.If(K.op(">", g0, K.i64(0)), (
                    *self._spin(K.op("-", g0, K.i64(1)), "!=", FLAG_INCL),
                    K.Assign(carry, K.KLoad("block_incl", K.op("-", g0, K.i64(1)), self.dtype, volatile=True)))),
                K.If(K.op(">", count, K.i64(0)), (K.Assign(carry, self.combine(carry, v)),)),
                K.If(K.op("==", count, K.i64(group - 1)), (
                    K.Declare(incl, self.combine(carry, agg)),
                    *self._publish("block_incl", incl, FLAG_INCL))),
                K.Store("sh_carry", K.i32(0), carry)))]
        return [K.If(K.op("==", WARP, K.i32(0)), tuple(warp0))]
