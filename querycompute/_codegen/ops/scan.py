"""Column operation "scan" on GPUs: the inclusive running fold of a ScanSpec (stage_specs.py),
out[i] = combine(..combine(combine(seed, x0), x1).., xi), as a launch.KernelSet of shape
"scan" (input 0 and output 0: n elements of spec.dtype; params follow spec.params).

How to run it (backends/gpu_scan.py wraps this): `ks = render(spec, dialect)`, build
ks.source with ks.options, then `gpu_launch.LaunchLoop(ks, runtime).run([values], params, n)`
returns (out,): launch.plan shapes every launch, as for a pass.

Tiles. Block b owns the tile of BLOCK * ept consecutive elements from b * BLOCK * ept
(ept = RUNS runs of 16 bytes / element size); thread t owns ept consecutive elements of it,
so "tile, then thread, then element" is element order. (A warp's loads are then not
coalesced per instruction, but every line a warp touches is used whole from L1 within the
unrolled run: CUB's "direct blocked" load.) Every kernel that reads a tile does:
  1. thread fold: tacc = x_base combined with its next elements, left to right;
  2. block scan: Hillis-Steele on the thread folds in shared memory; at step d thread t
     sets s[t] = combine(s[t - d], s[t]) (left operand = earlier elements), so s[t] ends as
     the fold of threads 0..t. Threads past n hold nothing and are never read (valid
     threads form a prefix of the block);
  3. downsweep (kernels that write): run = carry (everything before the tile, seed
     included), then combine(run, s[t - 1]) for t > 0, then each element in turn:
     run = combine(run, x_i); out[i] = run.
The seed starts the carry chain, so it goes in once, in front of element 0.

OpenCL and Metal: reduce-then-scan, three kernels, no block ever waits on another:
  <name>_scan_partials   (tiles) steps 1-2; block_aggs[b] = fold of tile b
  <name>_scan_blocks     (one block) scans block_aggs a BLOCK-sized chunk at a time with
                         steps 2 and a running carry from the seed: block_carry[b] = seed
                         folded with tiles 0..b-1
  <name>_scan_downsweep  (tiles) steps 1-3 with carry = block_carry[b]
CUDA: single pass with decoupled look-back (Merrill & Garland), after a tiny init kernel:
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
  block waits for is already set: the look-back runs (and is tested) without spinning.

Determinism: every grouping depends only on n (and the group size), never on timing, so a
float scan gives the same bits run to run (not np.cumsum's: a different grouping).
Bytes per element (`bytes_per_element`): reduce-then-scan reads the input twice and writes
once; the look-back kernel reads it once from DRAM (the downsweep re-reads its own tile,
just loaded, from cache) and writes once.
"""
from __future__ import annotations

from .. import dtypes as D
from .. import expr as E
from .. import kernel_ir as K
from ..launch import BLOCK, BufferSpec, KernelArg, KernelSet, KernelSpec
from ..lower_block import LANE, LID, WARP
from ..lower_element import check_name, elems_per_thread, rename
from ..program import ElementProgram
from ..stage_specs import ScanSpec, check_combine

SHAPE = "scan"
LOOKBACK = 32            # CUDA look-back group: tiles, one per lane of warp 0
# 16-byte runs per thread and tile: more work per block scan (its 16 barriers). GPUs: 4
# (64 bytes a thread: 16 float32, as CUB's scans take); CPU devices (pocl, the dialects whose
# printer folds runs apart), where each barrier costs most: 8 (int64 at 1e7: 2.5-3x faster
# than 1 run on pocl).
RUNS = {"gpu": 4, "cpu": 8}
ALGORITHM = {"cuda": "lookback", "opencl": "reduce_then_scan", "metal": "reduce_then_scan",
             "webgpu": "reduce_then_scan"}
__all__ = ["SHAPE", "render", "bytes_per_element", "describe", "lower"]

N = K.KVar("n", "int64")
TILE = K.KVar("tile", "int64")
BASE = K.KVar("base", "int64")
VALID = K.KVar("valid", "bool")
NUM_BLOCKS = K.KVar("num_blocks", "int64")
SH = "sh_scan"
IN, OUT = "in_values", "out0"
FLAG_AGG, FLAG_INCL = K.KConst(1, "uint32"), K.KConst(2, "uint32")
# shuffles move 32- and 64-bit values: narrower ones travel as int32
_SHUFFLE_AS = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "int32", "uint16": "int32"}


def _ex(v) -> E.Expr:
    return E.Var(v.name, v.dtype) if isinstance(v, K.KVar) else v


def _i64(e) -> K.KExpr:
    return K.KCast(e, "int64")


def _min(a, b) -> K.KExpr:
    return K.KSelect(K.op("<", a, b), a, b, "int64")


class _Lower:
    """The kernel IR of one ScanSpec (see the module docstring for the algorithm)."""

    def __init__(self, spec: ScanSpec, runs: int, bind: dict | None = None):
        check_name(spec.name, "scan")
        _check(spec)
        self.spec, self.dtype = spec, spec.dtype
        self.bind = bind or {}      # argument -> KernelArg replacing the default (ops/compact_gpu.py)
        # the C names of the input and output buffers (a bound one's own, so that a kernel set
        # holding these kernels beside others never gives one name two buffers)
        self.IN = self.bind["in"].name if "in" in self.bind else IN
        self.OUT = self.bind["out"].name if "out" in self.bind else OUT
        self.ept = elems_per_thread([spec.dtype]) * runs
        self.tile_size = BLOCK * self.ept
        self._prog = ElementProgram((), spec.params, (), ())
        self.params = tuple(KernelArg(f"p_{check_name(s.name, 'parameter')}", "param", s.dtype, k)
                            for k, s in enumerate(spec.params))

    def var(self, name: str) -> K.KVar:
        return K.KVar(name, self.dtype)

    def combine(self, a, b) -> K.Elem:
        """combine(acc=a, item=b): a holds the earlier elements."""
        e = rename(self.spec.combine, self._prog, {"acc": _ex(a), "item": _ex(b)})
        return K.Elem(e if e.dtype == self.dtype else E.Cast(e, self.dtype))

    def zero(self) -> K.KConst:
        return K.KConst(0, self.dtype)

    # ---- the per-tile steps ------------------------------------------------------------
    def tile_start(self, tile: K.KExpr) -> list:
        return [K.Declare(TILE, tile),
                K.Declare(BASE, K.op("*", K.op("+", K.op("*", TILE, K.i64(BLOCK)), _i64(LID)), K.i64(self.ept)))]

    def thread_fold(self) -> list:
        """Step 1: tacc = this thread's elements folded left to right; valid = it has any."""
        tacc, x, i, k = self.var("tacc"), self.var("x"), K.KVar("i", "int64"), K.KVar("k", "int32")
        rest = K.For(k, K.i32(1), K.op("<", k, K.i32(self.ept)), K.op("+", k, K.i32(1)), (
            K.Declare(i, K.op("+", BASE, _i64(k))),
            K.If(K.op(">=", i, N), (K.Break(),)),
            K.Declare(x, K.KLoad(self.IN, i, self.dtype)),
            K.Assign(tacc, self.combine(tacc, x))), unroll=True)
        return [K.Comment(f"Step 1: fold this thread's {self.ept} consecutive elements, left to right."),
                K.Declare(VALID, K.op("<", BASE, N)),
                K.Declare(tacc, self.zero()),
                K.If(VALID, (K.Assign(tacc, K.KLoad(self.IN, BASE, self.dtype)),)),
                rest]

    def block_scan(self, value: K.KVar) -> list:
        """Step 2: SH[t] = fold of the values of threads 0..t (valid threads only)."""
        off, act = K.KVar("offset", "int32"), K.KVar("active", "bool")
        left, right = self.var("left"), self.var("right")
        step = (K.Declare(act, K.op("&&", VALID, K.op(">=", LID, off))),
                K.Declare(left, K.KSelect(act, K.KLoad(SH, K.op("-", LID, off), self.dtype), self.zero(), self.dtype)),
                K.Barrier(),
                K.If(act, (K.Declare(right, K.KLoad(SH, LID, self.dtype)), K.Store(SH, LID, self.combine(left, right)))),
                K.Barrier())
        return [K.Comment("Step 2: ordered block scan (Hillis-Steele): s[t] = combine(s[t - d], s[t])."),
                K.Store(SH, LID, value), K.Barrier(),
                K.For(off, K.i32(1), K.op("<", off, K.i32(BLOCK)), K.op("<<", off, K.i32(1)), step)]

    def last_thread(self) -> K.KExpr:
        """The tile's last thread with elements: its SH slot holds the tile's fold."""
        left = _min(K.op("-", N, K.op("*", TILE, K.i64(self.tile_size))), K.i64(self.tile_size))
        return K.op("-", K.op("/", K.op("+", left, K.i64(self.ept - 1)), K.i64(self.ept)), K.i64(1))

    def downsweep(self, carry: K.KExpr) -> list:
        """Step 3: write every element's inclusive result."""
        run, prev, x, i, k = self.var("run"), self.var("prev"), self.var("x"), K.KVar("i", "int64"), K.KVar("k", "int32")
        return [K.Comment("Step 3: carry, then the earlier threads' fold, then each element in turn."),
                K.Declare(run, carry),
                K.If(K.op("&&", VALID, K.op(">", LID, K.i32(0))),
                     (K.Declare(prev, K.KLoad(SH, K.op("-", LID, K.i32(1)), self.dtype)),
                      K.Assign(run, self.combine(run, prev)))),
                K.For(k, K.i32(0), K.op("<", k, K.i32(self.ept)), K.op("+", k, K.i32(1)), (
                    K.Declare(i, K.op("+", BASE, _i64(k))),
                    K.If(K.op(">=", i, N), (K.Break(),)),
                    K.Declare(x, K.KLoad(self.IN, i, self.dtype)),
                    K.Assign(run, self.combine(run, x)),
                    K.Store(self.OUT, i, run)), unroll=True)]

    def seed(self) -> K.Elem:
        return K.Elem(E.Const(self.spec.seed.value, self.dtype))

    # ---- the kernels -------------------------------------------------------------------
    def args(self, *names) -> tuple[KernelArg, ...]:
        table = {"in": KernelArg(IN, "input", self.dtype, 0), "n": KernelArg("n", "n", "int64"),
                 "out": KernelArg(OUT, "output", self.dtype, 0),
                 "num_blocks": KernelArg("num_blocks", "value", "int64")}
        out = []
        for nm in names:
            if nm == "params":
                out += self.params
            elif nm in self.bind:
                out.append(self.bind[nm])
            else:
                out.append(table.get(nm) or KernelArg(nm, "scratch", _SCRATCH[nm] or self.dtype, scratch=nm))
        return tuple(out)

    def kernel(self, suffix: str, args, body, doc: str, shared: tuple = (SH,)) -> K.Kernel:
        arrays = {SH: K.SharedArray(SH, self.dtype, BLOCK), "sh_tile": K.SharedArray("sh_tile", "uint32", 1),
                  "sh_carry": K.SharedArray("sh_carry", self.dtype, 1),
                  "sh_state": K.SharedArray("sh_state", "int32", 1)}
        return K.Kernel(f"{self.spec.name}_scan_{suffix}", args, tuple(arrays[a] for a in shared), tuple(body), doc=doc)

    def partials(self) -> K.Kernel:
        body = (self.tile_start(_i64(K.KThread("group_id"))) + self.thread_fold() + self.block_scan(self.var("tacc"))
                + [K.If(K.op("==", LID, K.i32(0)),
                        (K.Store("block_aggs", TILE, K.KLoad(SH, self.last_thread(), self.dtype)),))])
        return self.kernel("partials", self.args("in", "params", "n", "block_aggs"), body,
                           f"{self.spec.name} scan step 1: the fold of every tile.")

    def blocks(self) -> K.Kernel:
        carry, tacc, chunk, j = self.var("carry"), self.var("tacc"), K.KVar("chunk", "int64"), K.KVar("j", "int64")
        before, prev, total = self.var("before"), self.var("prev"), self.var("total")
        body = (K.Declare(j, K.op("+", chunk, _i64(LID))),
                K.Declare(VALID, K.op("<", j, NUM_BLOCKS)),
                K.Declare(tacc, K.KSelect(VALID, K.KLoad("block_aggs", j, self.dtype), self.zero(), self.dtype)),
                *self.block_scan(tacc),
                K.If(VALID, (K.Declare(before, carry),
                             K.If(K.op(">", LID, K.i32(0)),
                                  (K.Declare(prev, K.KLoad(SH, K.op("-", LID, K.i32(1)), self.dtype)),
                                   K.Assign(before, self.combine(carry, prev)))),
                             K.Store("block_carry", j, before))),
                K.Declare(total, K.KLoad(SH, K.op("-", _min(K.op("-", NUM_BLOCKS, chunk), K.i64(BLOCK)), K.i64(1)),
                                         self.dtype)),
                K.Assign(carry, self.combine(carry, total)),
                K.Barrier())      # the next chunk's scan overwrites the slots just read
        loop = K.For(chunk, K.i64(0), K.op("<", chunk, NUM_BLOCKS), K.op("+", chunk, K.i64(BLOCK)), body)
        return self.kernel("blocks", self.args("block_aggs", "num_blocks", "params", "block_carry"),
                           [K.Comment("The seed starts the carry: it goes in once, in front of element 0."),
                            K.Declare(carry, self.seed()), loop],
                           f"{self.spec.name} scan step 2 (one block): block_carry[b] = seed folded with tiles 0..b-1.")

    def downsweep_kernel(self) -> K.Kernel:
        body = (self.tile_start(_i64(K.KThread("group_id"))) + self.thread_fold() + self.block_scan(self.var("tacc"))
                + self.downsweep(K.KLoad("block_carry", TILE, self.dtype)))
        return self.kernel("downsweep", self.args("in", "params", "n", "block_carry", "out"), body,
                           f"{self.spec.name} scan step 3: every tile's scan from its carry.")

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
        wire = _SHUFFLE_AS.get(self.dtype)

        def down(x, dtype, w):
            return K.KCast(K.KShuffleDown(K.KCast(x, w), off, w), dtype) if w else K.KShuffleDown(x, off, dtype)
        # lane l holds (fold of its segment, whether the segment starts at an inclusive prefix);
        # the lower segment's pair combined with the higher one's: the higher one alone when
        # it holds an inclusive prefix (everything before it is already in that prefix)
        tree = K.For(off, K.i32(1), K.op("<", off, K.i32(32)), K.op("<<", off, K.i32(1)), (
            K.Declare(o, down(v, self.dtype, wire)),
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
        wire = _SHUFFLE_AS.get(self.dtype)
        shuffled = (K.KCast(K.KShuffleDown(K.KCast(v, wire), off, wire), self.dtype) if wire
                    else K.KShuffleDown(v, off, self.dtype))
        lane = _i64(LANE)
        tree = K.For(off, K.i32(1), K.op("<", off, K.i32(32)), K.op("<<", off, K.i32(1)), (
            K.Declare(o, shuffled),
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


_SCRATCH = {"block_aggs": None, "block_carry": None, "block_incl": None, "block_flags": "uint32", "ticket": "uint32"}


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


def _check(spec: ScanSpec) -> None:
    check_combine(spec.combine, spec.dtype, spec.params, f"scan {spec.name}")


def lower(spec: ScanSpec, dialect: str, group: int = LOOKBACK):
    """-> (kernels in launch order, KernelSpecs, outputs, scratch, ept)."""
    from ..gpu import printer          # gpu imports ops: import it late
    lo = _Lower(spec, RUNS["cpu" if printer(dialect).FOLD_RUNS_APART else "gpu"])
    if ALGORITHM[dialect] == "lookback":
        if not 1 < group <= 32:
            raise ValueError(f"look-back group of {group} tiles: 2..32 (one per lane of a warp)")
        kernels = [lo.init(), lo.lookback(group)]
        grids, roles = ("one", "tiles"), ("init", "scan")
        scratch = ("block_aggs", "block_incl", "block_flags", "ticket")
    else:
        kernels = [lo.partials(), lo.blocks(), lo.downsweep_kernel()]
        grids, roles = ("tiles", "one", "tiles"), ("partials", "scan", "downsweep")
        scratch = ("block_aggs", "block_carry")
    specs = [KernelSpec(k.name, k.args, g, "any", r) for k, g, r in zip(kernels, grids, roles)]
    buffers = tuple(BufferSpec(nm, _SCRATCH[nm] or spec.dtype, "one" if nm == "ticket" else "blocks")
                    for nm in scratch)
    return kernels, specs, (BufferSpec(OUT, spec.dtype, "n"),), buffers, lo.ept


def render(spec: ScanSpec, dialect: str, group: int = LOOKBACK) -> KernelSet:
    """Every kernel of the scan in `dialect` ("cuda", "opencl" or "metal") with its launch
    rules; `group` (CUDA) is the look-back group in tiles (tests shrink it). Raises
    codegen.errors.UnsupportedType when the dialect can't hold a dtype."""
    from ..gpu import printer          # gpu imports ops: import it late
    pr = printer(dialect)
    for d in [spec.dtype] + [p.dtype for p in spec.params]:
        pr.check(d)
    kernels, specs, outputs, scratch, ept = lower(spec, dialect, group)
    header = (f"// querycompute scan {spec.name}: {describe(spec, dialect)}\n"
              f"// compile options: {' '.join(pr.OPTIONS) or '(none)'}"
              + (f" ({pr.OPTIONS_WHY})" if pr.OPTIONS_WHY else ""))
    return KernelSet(dialect=dialect, pass_name=spec.name, shape=SHAPE, source=pr.render(kernels, header),
                     options=pr.OPTIONS, kernels=tuple(specs), outputs=outputs, scratch=scratch,
                     elems_per_thread=ept)


def bytes_per_element(spec: ScanSpec, dialect: str) -> list[tuple[str, int]]:
    """(kernel, DRAM bytes read + written per element) of the launches that touch every
    element, in launch order (the rest move O(tiles) block values): reduce-then-scan reads
    the input in two kernels and writes once; the look-back reads once and writes once (its
    downsweep re-reads the tile it just loaded, from cache)."""
    size, name = D.itemsize(spec.dtype), spec.name
    if ALGORITHM[dialect] == "lookback":
        return [(f"{name}_scan_lookback", 2 * size)]
    return [(f"{name}_scan_partials", size), (f"{name}_scan_downsweep", 2 * size)]


def describe(spec: ScanSpec, dialect: str) -> str:
    """One line for explain(): algorithm, kernels, bytes per element."""
    total = sum(b for _, b in bytes_per_element(spec, dialect))
    if ALGORITHM[dialect] == "lookback":
        how = (f"single-pass {'decoupled' if exact_combine(spec) else 'fixed-group'} look-back "
               f"(init + 1 kernel)")
    else:
        how = "reduce-then-scan (3 kernels)"
    return f"inclusive scan of {spec.dtype}: {how}, {total} B per element"
