"""GPU lowering of stage op "compact" (ops/compact.py): order-preserving stream compaction.

The survivors of the filter are written densely in source order: survivor r goes to slot r,
its rank among the survivors, i.e. a prefix sum of the keep flags. Block b owns a tile of
BLOCK * ept * runs consecutive elements and thread t of it ept * runs consecutive elements
(`runs` runs of ept, each one 16-byte load where the input is contiguous), so "tile, then
thread, then element" is source order. A survivor's rank is (survivors of the tiles before)
+ (survivors of the earlier threads of its tile) + (its rank in its thread's run). The tile
prefix (the first term) is a scan of the per-tile counts. Two algorithms (ALGORITHM below
says which each dialect runs; it follows the dialect's capabilities):

One pass with a decoupled look-back (dialects whose blocks make forward progress and that
have 64-bit words, DialectCaps.forward_progress and int64: CUDA), CUB's DeviceSelect scheme:
  <pass>_compact_init      (one block) zeroes the tile status words and the tile ticket
  <pass>_compact_lookback  (tiles) takes its tile from the ticket; each thread counts the
      survivors of its runs (the only DRAM read of the input); a block scan of the thread
      counts (shuffles within each warp, the warp totals through shared memory: one
      barrier) gives the tile's count and each thread's offset in the tile; warp 0 finds
      the survivors of the tiles before (below); every thread then recomputes its runs
      (the tile was just read: L1/L2, not DRAM) and stages its survivors' values in shared
      memory at their offsets; after a barrier the block writes the staged values out
      coalesced, thread j storing staged values j, j + BLOCK, ... at prefix + j. The last
      tile writes the total.
  Tile status: ONE 64-bit word a tile, count << 2 | flag, flag 0 = nothing published yet,
      1 = the tile's own count (aggregate), 2 = the survivors of tiles 0..b (inclusive
      prefix); 62 bits of count hold any n. A tile publishes it with one volatile 64-bit
      store (st.volatile.global.u64: an aligned 64-bit access is single-copy atomic in the
      PTX memory model, so a reader sees the old word or the new one, never a flag without
      its count) and a reader takes it with one 64-bit load: no fence between flag and
      value on either side (the flag-then-value protocol of ops/scan/lookback_gpu.py needs
      one on each, four a tile). Tile 0 publishes its inclusive prefix at once, every other
      tile its aggregate first; then warp 0 reads the 32 status words before its window end,
      one a lane (a lane spins while its word is 0), adds them nearest-last with a
      segmented shuffle tree (a lane holding an inclusive prefix drops everything before
      it), and moves the window 32 tiles back until a window held an inclusive prefix;
      then the tile publishes its own inclusive prefix. It never waits for an inclusive
      prefix, only for aggregates, which every earlier tile publishes before it looks back:
      tiles go to blocks in the order the blocks take the atomic ticket, so every earlier
      tile belongs to a block that is already running (forward progress), whatever order
      the hardware starts blocks in. Counts are integers: any grouping gives the same
      sum, so the output is the same bytes whatever was published first.
  Tile size: `runs` runs of 16 bytes of the widest element a thread (RUNS = 4: 64 bytes,
      256 x 16 float32 = 4096 elements a tile, against 256 x 4 before), halved while
      the staged survivors of a tile (BLOCK * ept * runs elements of every output) would
      exceed STAGE_BYTES = 24 KB of shared memory, so that 8 blocks of 256 threads (the
      __launch_bounds__ the compaction promises, full occupancy) fit in an SM's 228 KB.
      Registers do not grow with the runs: a thread keeps only its count (the values are
      recomputed in the write pass and go straight to shared memory); ptxas fits every
      kernel in the 32 registers of __launch_bounds__(256, 8) without a spill (sm_90). A
      thread whose runs all lie below n takes them unrolled with wide loads and no bounds
      checks; only the thread holding n walks its elements one by one (`_runs`). A pass over whole shaped elements keeps one run (their register runs
      are sized for it: elements.min_blocks).
  The CPU harness runs blocks one after another in ticket order, so there every look-back
  finds its predecessor's inclusive prefix in its first window; the walk back over windows
  of aggregates is tested by launching one tile against status words laid out by the test
  (tests/test_issue30_compaction_one_pass.py).
Reduce-then-scan (OpenCL, Metal and WGSL: no forward-progress guarantee between work-groups,
so no block ever waits on another):
  <pass>_compact_count          (tiles) survivors per tile -> block_counts
  <pass>_compact_scan_partials  (tiles/T) |  scan.py's reduce-then-scan of block_counts,
  <pass>_compact_scan_blocks    (one)     |  T counts a block: block_incl[b] = survivors of
  <pass>_compact_scan_downsweep (tiles/T) |  tiles 0..b (a multi-block scan, not one block)
  <pass>_compact_scatter        (tiles) recompute, rank and write the survivors from
      block_incl[b] - block_counts[b]; the last tile writes the total.
No atomic appends: the output order is the source order and the same input gives the same
bytes whatever the hardware's block order.

With a ToArray window [lo, hi) (program.ToArray): only survivors of rank lo <= r < hi are
stored, at r - lo; a tile whose ranks miss the window stores nothing (block-uniform test),
and total = max(0, min(survivors, hi) - lo) (compact.window_total).

DRAM bytes per element (input size S, output size O, survival fraction f): one pass
S + f*O; reduce-then-scan 2*S + f*O (count and scatter both read the input), plus O(tiles)
words for the counts in both (one pass: one 8-byte status word a tile).
"""
from __future__ import annotations

from dataclasses import replace

from ... import dtypes as D
from ...ir import expr as E
from ...ir import kernel_ir as K
from ...dialects.by_name import DIALECTS, caps, printer
from ...launch import BLOCK, BufferSpec, KernelArg, KernelSpec
from ...lower.block import LANE, LID, WARP, block_inclusive_scan, block_reduce, Acc
from ...lower.element import BASE, element, per_thread_loop, declare_base, input_args, rename, variant
from ...ir.stage_specs import ScanSpec
from ..scan import gpu as scan_op

COUNT = K.KVar("survivors", "int64")       # this thread's
INCL = K.KVar("thread_incl", "int64")      # survivors of threads 0..t of the tile
GROUP = K.KThread("group_id")
ONE = K.i64(1)
STAGE = "sh_out"               # shared staging array of output k: sh_out<k>
__all__ = ["lower", "algorithm", "tile_runs"]


# The compaction's algorithm per dialect, from its capabilities: the one-pass look-back where
# blocks make forward progress and a tile's status fits one 64-bit word (forward_progress and
# int64: CUDA), else reduce-then-scan. A mutable table, so a benchmark can pin either one
# (benchmarks/gpu_scan_compaction.py --compaction); `lower` refuses a look-back where the
# capabilities lack. History (why CUDA ran reduce-then-scan until issue 30; that reason is
# gone with the status word): with a flag word and a separate count (a fence between them on
# both sides, 256 x 4 tiles, a 17-barrier block scan), the look-back ran W2 (n = 1e8) on an
# H100 in 4.9 ms (scan.py's fixed look-back) and 2.06 ms (its decoupled one) against 0.70 ms
# for reduce-then-scan; the packed status word and the larger tiles of today's one-pass
# lowering have no device figure yet (docs/performance.md).
ALGORITHM = {name: "lookback" if cls.CAPS.forward_progress and cls.CAPS.int64 else "reduce_then_scan"
             for name, cls in DIALECTS.items()}


def algorithm(dialect: str) -> str:
    """"lookback" (one pass: dialects with forward progress and 64-bit words, CUDA) or
    "reduce_then_scan" (the others); ALGORITHM's entry."""
    return ALGORITHM[dialect]


def _counts_scan(name: str, dialect: str) -> scan_op._Lower:
    """scan.py's lowering of the int64 sum of the tile counts (reduce-then-scan)."""
    acc, item = E.Var("acc", "int64"), E.Var("item", "int64")
    spec = ScanSpec("int64", E.Binary("add", acc, item, "int64"), E.Const(0, "int64"), (), f"{name}_compact")
    runs = scan_op.RUNS["cpu" if printer(dialect).FOLD_RUNS_APART else "gpu"]
    bind = {"in": KernelArg("block_counts", "scratch", "int64", scratch="block_counts"),
            "out": KernelArg("block_incl", "scratch", "int64", scratch="block_incl")}
    lo = scan_op._Lower(spec, runs, bind)
    lo.grid = grid = f"tiles/{lo.tile_size}"
    # the scan's n is the number of compaction tiles; its num_blocks the count-scan tiles
    lo.bind.update({"n": KernelArg("n", "value", "int64", rule="tiles"),
                    "num_blocks": KernelArg("num_blocks", "value", "int64", rule=grid),
                    "block_aggs": KernelArg("block_aggs", "scratch", "int64", scratch="count_aggs"),
                    "block_carry": KernelArg("block_carry", "scratch", "int64", scratch="count_carry")})
    return lo


def _kvar(a: KernelArg) -> K.KVar:
    return K.KVar(a.name, a.dtype)


def _count(prog, strided: bool, ept: int) -> list:
    """COUNT = this thread's survivors (BASE declared before)."""
    survivor = element(prog, strided, ()) + [K.Assign(COUNT, K.op("+", COUNT, ONE))]
    return [K.Declare(COUNT, K.i64(0)), per_thread_loop(ept, survivor)]


def _window_test(start, end, window) -> K.KExpr:
    lo, hi = map(_kvar, window)
    return K.op("&&", K.op(">", end, lo), K.op("<", start, hi))


def _total(count: K.KExpr, window) -> K.KExpr:
    """compact.window_total in the kernel: max(0, min(count, hi) - lo)."""
    if not window:
        return count
    lo, hi = map(_kvar, window)
    kept = K.op("-", K.KSelect(K.op("<", count, hi), count, hi, "int64"), lo)
    return K.KSelect(K.op(">", kept, K.i64(0)), kept, K.i64(0), "int64")


def _is_last(tile: K.KExpr) -> K.KExpr:
    return K.op("&&", K.op("==", LID, K.i32(0)),
                K.op("==", tile, K.op("-", K.KVar("num_blocks", "int64"), ONE)))


# ---- CUDA: single pass ----------------------------------------------------------------------
STATUS = "tile_status"         # one 64-bit word per tile: count << 2 | flag
FLAG_BITS = 2
FLAG_AGG, FLAG_INCL = 1, 2     # 0: nothing published yet
RUNS = 4                       # 16-byte runs a thread and tile (64 bytes of its widest element)
STAGE_BYTES = 24 * 1024        # shared staging of the survivors, all outputs together
LANE_ZERO = K.i32(0)


def tile_runs(dialect: str, ept: int, out_dtypes, shaped: bool = False, algo: str | None = None) -> int:
    """16-byte runs of `ept` elements each thread takes in the one-pass look-back's tile (1
    for reduce-then-scan): RUNS, halved while the staging of a tile's survivors (BLOCK * ept *
    runs elements of every output) exceeds STAGE_BYTES; 1 for a pass over whole shaped
    elements (their register runs are sized for one run: elements.min_blocks)."""
    if (algo or algorithm(dialect)) != "lookback" or shaped:
        return 1
    per = BLOCK * ept * max(1, sum(D.itemsize(d) for d in out_dtypes))
    runs = RUNS
    while runs > 1 and runs * per > STAGE_BYTES:
        runs //= 2
    return runs


def _word(count: K.KExpr, flag) -> K.KExpr:
    """A tile's status word: the count above FLAG_BITS flag bits."""
    return K.op("|", K.op("<<", K.KCast(count, "uint64"), K.KConst(FLAG_BITS, "uint64")), flag)


def _flag(c: int) -> K.KConst:
    return K.KConst(c, "uint64")


def _init_kernel(name: str) -> K.Kernel:
    j = K.KVar("j", "int64")
    body = (K.For(j, K.KCast(LID, "int64"), K.op("<", j, K.KVar("num_blocks", "int64")), K.op("+", j, K.i64(BLOCK)),
                  (K.Store(STATUS, j, K.KConst(0, "uint64")),)),
            K.If(K.op("==", LID, K.i32(0)), (K.Store("ticket", K.i32(0), K.KConst(0, "uint32")),)))
    args = (KernelArg("num_blocks", "value", "int64"), KernelArg(STATUS, "scratch", "uint64", scratch=STATUS),
            KernelArg("ticket", "scratch", "uint32", scratch="ticket"))
    return K.Kernel(f"{name}_compact_init", args, (), body,
                    doc=f"{name} compaction: no tile published yet, tickets from 0.")


def _warp_block_scan(value: K.KVar, result: K.KVar, total: K.KVar) -> tuple[list, K.SharedArray]:
    """result = sum of `value` over threads 0..local_id, total = over the block: an inclusive
    scan in each warp by shuffles, the warps' totals through shared memory (one barrier)."""
    off, other, w, t = K.KVar("offset", "int32"), K.KVar("other", "int64"), K.KVar("w", "int32"), K.KVar("warp_total", "int64")
    before = K.KVar("warps_before", "int64")
    up = K.KSelect(K.op(">=", LANE, off), K.op("-", LANE, off), LANE, "int32")
    warps = BLOCK // 32
    stmts = [K.Comment("Block-wide inclusive prefix sum: in each warp by shuffles, then the totals of the\n"
                       "warps before this one's (one barrier)."),
             K.Declare(result, value),
             K.For(off, K.i32(1), K.op("<", off, K.i32(32)), K.op("<<", off, K.i32(1)), (
                 K.Declare(other, K.KShuffle(result, up, "int64")),
                 K.If(K.op(">=", LANE, off), (K.Assign(result, K.op("+", result, other)),)))),
             K.If(K.op("==", LANE, K.i32(31)), (K.Store("sh_warp", WARP, result),)),
             K.Barrier(),
             K.Declare(before, K.i64(0)),
             K.Declare(total, K.i64(0)),
             K.For(w, K.i32(0), K.op("<", w, K.i32(warps)), K.op("+", w, K.i32(1)), (
                 K.Declare(t, K.KLoad("sh_warp", w, "int64")),
                 K.If(K.op("<", w, WARP), (K.Assign(before, K.op("+", before, t)),)),
                 K.Assign(total, K.op("+", total, t))), unroll=True),
             K.Assign(result, K.op("+", result, before))]
    return stmts, K.SharedArray("sh_warp", "int64", warps)


def _look_back(tile: K.KExpr, agg: K.KExpr) -> list:
    """The survivors of the tiles before `tile` -> sh_carry[0] (decoupled look-back over the
    tiles' status words, CUB's DeviceSelect scheme: the module docstring); warp 0 runs it."""
    status, j, end = K.KVar("status", "uint64"), K.KVar("j", "int64"), K.KVar("window_end", "int64")
    v, o, carry = K.KVar("v", "int64"), K.KVar("other", "int64"), K.KVar("carry", "int64")
    inc, o_inc, off = K.KVar("has_incl", "int32"), K.KVar("other_incl", "int32"), K.KVar("offset", "int32")
    load = K.KLoad(STATUS, j, "uint64", volatile=True)
    spins = K.KVar("spins", "int32")
    flag_of = lambda w: K.op("&", w, _flag((1 << FLAG_BITS) - 1))          # noqa: E731
    tree = K.For(off, K.i32(1), K.op("<", off, K.i32(32)), K.op("<<", off, K.i32(1)), (
        K.Declare(o, K.KShuffleDown(v, off, "int64")),
        K.Declare(o_inc, K.KShuffleDown(inc, off, "int32")),
        K.If(K.op("==", K.op("%", LANE, K.op("*", off, K.i32(2))), K.i32(0)), (
            K.If(K.op("!=", o_inc, K.i32(0)), (K.Assign(v, o), K.Assign(inc, K.i32(1))),
                 (K.Assign(v, K.op("+", v, o)),)),))))
    window = (
        K.Declare(j, K.op("+", K.op("-", end, K.i64(32)), K.KCast(LANE, "int64"))),
        K.Declare(status, _flag(FLAG_INCL)),       # before tile 0: an inclusive prefix of 0
        K.If(K.op(">=", j, K.i64(0)), (
            K.Assign(status, load),
            K.For(spins, K.i32(0), K.op("==", flag_of(status), _flag(0)), K.op("+", spins, K.i32(1)),
                  (K.Assign(status, load),)))),
        K.Declare(v, K.KCast(K.op(">>", status, K.KConst(FLAG_BITS, "uint64")), "int64")),
        K.Declare(inc, K.KSelect(K.op("==", flag_of(status), _flag(FLAG_INCL)), K.i32(1), K.i32(0), "int32")),
        tree,
        K.Comment("Lane 0 holds the window's count from its last inclusive prefix on; every lane takes it."),
        K.Assign(carry, K.op("+", carry, K.KShuffle(v, LANE_ZERO, "int64"))),
        K.If(K.op("!=", K.KShuffle(inc, LANE_ZERO, "int32"), K.i32(0)), (K.Break(),)))
    first = K.op("==", tile, K.i64(0))
    warp0 = (
        K.Comment("Publish this tile's count in one 64-bit word (count << 2 | flag): tile 0 its inclusive\n"
                  "prefix, every other tile its aggregate. One store, so no fence between flag and count."),
        K.If(K.op("==", LANE, K.i32(0)), (
            K.Store(STATUS, tile, _word(agg, K.KSelect(first, _flag(FLAG_INCL), _flag(FLAG_AGG), "uint64")),
                    volatile=True),)),
        K.Comment("Decoupled look-back: a lane reads one of the 32 status words before the window end (spins\n"
                  "while 0), a segmented shuffle tree adds them (an inclusive prefix drops what lies before\n"
                  "it); the window moves back until it held an inclusive prefix."),
        K.Declare(carry, K.i64(0)),
        K.For(end, tile, K.op(">", end, K.i64(0)), K.op("-", end, K.i64(32)), window),
        K.If(K.op("==", LANE, K.i32(0)), (
            K.If(K.op("!=", tile, K.i64(0)),
                 (K.Store(STATUS, tile, _word(K.op("+", carry, agg), _flag(FLAG_INCL)), volatile=True),)),
            K.Store("sh_carry", K.i32(0), carry))))
    return [K.If(K.op("==", WARP, K.i32(0)), warp0)]


def _runs(runs: int, ept: int, first: K.KExpr, body: list) -> list:
    """Each of this thread's `runs` runs of `ept` consecutive elements from `first` in turn,
    `body` a per_thread_loop's over each (BASE its first element). Where all of them lie
    below n (every thread but the last tile's), the runs are unrolled without bounds checks
    (lower/vector.py: wide loads only); the thread holding n walks its elements one by one,
    so the element code is emitted once per run plus once, not twice per run."""
    if runs == 1:                                  # `first` is BASE
        return [per_thread_loop(ept, body)]
    r = K.KVar("run", "int32")
    whole = K.For(r, K.i32(0), K.op("<", r, K.i32(runs)), K.op("+", r, K.i32(1)), (
        K.Declare(BASE, K.op("+", first, K.op("*", K.KCast(r, "int64"), K.i64(ept)))),
        per_thread_loop(ept, body, whole=True)), unroll=True)
    tail = replace(per_thread_loop(ept * runs, body), unroll=False, run=0)
    return [K.If(K.op("<=", K.op("+", first, K.i64(ept * runs)), K.KVar("n", "int64")),
                 (K.Comment(f"All {runs} runs of {ept} below n: no bounds checks."), whole),
                 (K.Comment("The thread holding n: element by element."), K.Declare(BASE, first), tail))]


def _lookback_kernel(p, prog, strided: bool, ept: int, runs: int, outs, window):
    name = p.name
    tile = K.KVar("tile", "int64")
    first = K.KVar("thread_first", "int64") if runs > 1 else BASE    # this thread's first element
    start = K.KVar("tile_start", "int64")          # survivors of the tiles before this one
    agg = K.KVar("tile_count", "int64")            # survivors of this tile
    lpos, j, r = K.KVar("lpos", "int64"), K.KVar("j", "int64"), K.KVar("rank", "int64")
    per_thread = ept * runs
    take = [K.Comment("Tiles go to blocks in the order they start (an atomic ticket): every earlier tile\n"
                      "belongs to a running block, so the look-back cannot deadlock."),
            K.If(K.op("==", LID, K.i32(0)), (K.Declare(K.KVar("ticket_no", "uint32"), K.KConst(0, "uint32")),
                                              K.AtomicAdd(K.KVar("ticket_no", "uint32"), "ticket", K.i32(0),
                                                          K.KConst(1, "uint32")),
                                              K.Store("sh_tile", K.i32(0), K.KVar("ticket_no", "uint32")))),
            K.Barrier(),
            K.Declare(tile, K.KCast(K.KLoad("sh_tile", K.i32(0), "uint32"), "int64")),
            K.Declare(first, K.op("*", K.op("+", K.op("*", tile, K.i64(BLOCK)), K.KCast(LID, "int64")),
                                  K.i64(per_thread)))]
    count = [K.Declare(COUNT, K.i64(0))] + _runs(runs, ept, first, element(prog, strided, ())
                                                 + [K.Assign(COUNT, K.op("+", COUNT, ONE))])
    scan, sh_warp = _warp_block_scan(COUNT, INCL, agg)
    stage = [K.Store(f"{STAGE}{k}", lpos, K.Elem(rename(e, prog))) for k, e in enumerate(prog.outputs)]
    stage.append(K.Assign(lpos, K.op("+", lpos, ONE)))
    rank = K.op("+", start, j)
    stores = tuple(K.Store(a.name, rank, K.KLoad(f"{STAGE}{k}", j, a.dtype)) for k, a in enumerate(outs))
    if window:
        lo, hi = map(_kvar, window)
        stores = (K.Declare(r, rank),
                  K.If(K.op("&&", K.op(">=", r, lo), K.op("<", r, hi)),
                       tuple(K.Store(a.name, K.op("-", r, lo), K.KLoad(f"{STAGE}{k}", j, a.dtype))
                             for k, a in enumerate(outs))))
    write = (_runs(runs, ept, first, element(prog, strided, prog.outputs) + stage)
             + [K.Barrier(),
                K.Comment("Coalesced: consecutive threads store consecutive survivors."),
                K.For(j, K.KCast(LID, "int64"), K.op("<", j, agg), K.op("+", j, K.i64(BLOCK)), stores)])
    if window:
        write = [K.Comment("A tile whose survivors all lie outside the window [lo, hi) has nothing to write."),
                 K.If(_window_test(start, K.op("+", start, agg), window), tuple(write))]
    body = (take + count + scan + _look_back(tile, agg)
            + [K.Barrier(),
               K.Declare(start, K.KLoad("sh_carry", K.i32(0), "int64")),
               K.If(_is_last(tile), (K.Store("total", K.i32(0), _total(K.op("+", start, agg), window)),)),
               K.Comment("Stage this thread's survivors at their offsets in the tile."),
               K.Declare(lpos, K.op("-", INCL, COUNT))]
            + write)
    args = (tuple(input_args(prog, strided)) + (KernelArg("n", "n", "int64"), KernelArg("num_blocks", "value", "int64"),
                                                KernelArg(STATUS, "scratch", "uint64", scratch=STATUS),
                                                KernelArg("ticket", "scratch", "uint32", scratch="ticket"),
                                                KernelArg("total", "scratch", "int64", scratch="total")) + outs)
    shared = (sh_warp, K.SharedArray("sh_tile", "uint32", 1), K.SharedArray("sh_carry", "int64", 1),
              *(K.SharedArray(f"{STAGE}{k}", a.dtype, BLOCK * per_thread) for k, a in enumerate(outs)))
    kname, doc = variant(f"{name}_compact_lookback", strided,
                         f"{name} compaction, single pass: count, look back, stage and write the survivors.")
    return K.Kernel(kname, args, shared, tuple(body), doc=doc)


# ---- OpenCL / Metal / WGSL: reduce-then-scan --------------------------------------------------
def _count_kernel(p, prog, strided: bool, ept: int):
    counts = KernelArg("block_counts", "scratch", "int64", scratch="block_counts")
    sum_counts = Acc((COUNT,), (K.i64(0),), lambda src: [K.Assign(COUNT, K.op("+", COUNT, K.Elem(src[0])))])
    shared, reduce_stmts = block_reduce([sum_counts], use_shuffles=False)
    stmts = [declare_base(ept)] + _count(prog, strided, ept) + reduce_stmts + [
        K.If(K.op("==", LID, K.i32(0)), (K.Store(counts.name, GROUP, COUNT),))]
    args = tuple(input_args(prog, strided)) + (KernelArg("n", "n", "int64"), counts)
    kname, doc = variant(f"{p.name}_compact_count", strided, f"{p.name} compaction step 1: survivors per tile.")
    return K.Kernel(kname, args, tuple(shared), tuple(stmts), doc=doc)


def _scatter_kernel(p, prog, strided: bool, ept: int, outs, window):
    pos, start, end = K.KVar("pos", "int64"), K.KVar("tile_start", "int64"), K.KVar("tile_end", "int64")
    writes = [K.Store(a.name, pos, K.Elem(rename(e, prog))) for a, e in zip(outs, prog.outputs)]
    stop = []
    if window:
        lo, hi = map(_kvar, window)
        writes = [K.If(K.op("&&", K.op(">=", pos, lo), K.op("<", pos, hi)),
                       tuple(K.Store(w.buffer, K.op("-", pos, lo), w.value) for w in writes))]
        stop = [K.If(K.op(">=", pos, hi), (K.Break(),))]    # the rest of the run is past the window
    writes.append(K.Assign(pos, K.op("+", pos, ONE)))
    stmts = [declare_base(ept)] + _count(prog, strided, ept) + block_inclusive_scan(COUNT, INCL, "sh_scan") + [
        K.Comment("This thread's survivors go right after those of earlier tiles and threads."),
        K.Declare(pos, K.op("+", start, K.op("-", INCL, COUNT))),
        per_thread_loop(ept, stop + element(prog, strided, prog.outputs) + writes)]
    if window:
        stmts = [K.Comment("A tile whose survivors all lie outside the window [lo, hi) has nothing to write."),
                 K.If(_window_test(start, end, window), tuple(stmts))]
    head = [K.Declare(end, K.KLoad("block_incl", GROUP, "int64")),
            K.Declare(start, K.op("-", end, K.KLoad("block_counts", GROUP, "int64"))),
            K.If(_is_last(K.KCast(GROUP, "int64")), (K.Store("total", K.i32(0), _total(end, window)),))]
    args = (tuple(input_args(prog, strided))
            + (KernelArg("n", "n", "int64"), KernelArg("num_blocks", "value", "int64"),
               KernelArg("block_counts", "scratch", "int64", scratch="block_counts"),
               KernelArg("block_incl", "scratch", "int64", scratch="block_incl"),
               KernelArg("total", "scratch", "int64", scratch="total"))
            + outs)
    kname, doc = variant(f"{p.name}_compact_scatter", strided,
                         f"{p.name} compaction step 3: recompute, rank and write survivors in order.")
    return K.Kernel(kname, args, (K.SharedArray("sh_scan", "int64", BLOCK),), tuple(head + stmts), doc=doc)


def lower(p, dialect: str, ept: int, outs: tuple, window, runs: int = 1, algo: str | None = None):
    """(kernels, specs, scratch BufferSpecs) of pass `p`'s compaction in `dialect` (the window's
    lo, hi are params of the pass, among input_args already); `algo`: "lookback" (CUDA) or
    "reduce_then_scan", default the dialect's (ALGORITHM); `runs`: the look-back's runs of
    `ept` elements a thread (tile_runs; the tile is BLOCK * ept * runs elements)."""
    prog = p.program
    algo = algo or algorithm(dialect)
    if algo == "lookback" and not (caps(dialect).forward_progress and caps(dialect).int64):
        raise ValueError(f"{dialect} has no look-back (no forward-progress guarantee between blocks, "
                         f"or no 64-bit tile status word)")
    if algo != "lookback" and runs != 1:
        raise ValueError("reduce-then-scan takes one run a thread")
    kernels, specs = [], []

    def add(kernel, grid, variant_, role):
        kernels.append(kernel)
        specs.append(KernelSpec(kernel.name, kernel.args, grid, variant_, role))

    if algo == "lookback":
        add(_init_kernel(p.name), "one", "any", "init")
        for strided in (False, True):
            add(_lookback_kernel(p, prog, strided, ept, runs, outs, window), "tiles",
                "strided" if strided else "contiguous", "scatter")
        scratch = (BufferSpec(STATUS, "uint64", "blocks"), BufferSpec("ticket", "uint32", "one"))
    else:
        lo_scan = _counts_scan(p.name, dialect)
        for strided in (False, True):
            add(_count_kernel(p, prog, strided, ept), "tiles", "strided" if strided else "contiguous", "count")
        add(lo_scan.partials(), lo_scan.grid, "any", "partials")
        add(lo_scan.blocks(), "one", "any", "scan")
        add(lo_scan.downsweep_kernel(), lo_scan.grid, "any", "downsweep")
        for strided in (False, True):
            add(_scatter_kernel(p, prog, strided, ept, outs, window), "tiles",
                "strided" if strided else "contiguous", "scatter")
        scratch = (BufferSpec("block_counts", "int64", "blocks"), BufferSpec("block_incl", "int64", "blocks"),
                   BufferSpec("count_aggs", "int64", lo_scan.grid), BufferSpec("count_carry", "int64", lo_scan.grid))
    return kernels, specs, scratch + (BufferSpec("total", "int64", "one"),)
