"""GPU lowering of stage op "compact" (ops/compact.py): order-preserving stream compaction.

The survivors of the filter are written densely in source order: survivor r goes to slot r,
its rank among the survivors, i.e. a prefix sum of the keep flags. Block b owns the tile of
BLOCK * ept consecutive elements from b * tile and thread t of it `ept` consecutive elements
of the tile, so "tile, then thread, then element" is source order. A survivor's rank is
(survivors of the tiles before) + (survivors of the earlier threads of its tile) + (its rank
in its thread's run). The tile prefix (the first term) is a scan of the per-tile counts, and
that scan is ops/scan/gpu.py's (one home for the multi-block scan). Two algorithms (ALGORITHM
below says which each dialect runs: reduce-then-scan everywhere today):

Look-back (dialects with forward progress between blocks, DialectCaps.forward_progress: CUDA;
on request: lower(..., algo="lookback")), single pass as CUB's
DeviceSelect::If:
  <pass>_compact_scan_init  (one block) zeroes the tile flags and the tile ticket
  <pass>_compact_lookback   (tiles) takes its tile from the ticket; each thread counts its
      survivors (the only DRAM read of the input); a block scan of the thread counts gives
      the tile's count (its aggregate, published at once) and each thread's local offset;
      warp 0 finds the tile prefix by scan.py's fixed look-back (no wait on a later tile,
      so no deadlock whatever order blocks start in); every thread then recomputes its run
      (the tile was just read: L1/L2, not DRAM) and stages its survivors' values in shared
      memory at their local offsets; after a barrier the block writes the staged values out
      coalesced, thread j storing staged values j, j + BLOCK, ... at prefix + j. The last
      tile writes the total.
Reduce-then-scan (every dialect): no block ever waits on another (OpenCL, Metal and WGSL
give no forward-progress guarantee between work-groups; on CUDA it is the faster one):
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

DRAM bytes per element (input size S, output size O, survival fraction f): look-back
S + f*O; reduce-then-scan 2*S + f*O (count and scatter both read the input), plus O(tiles)
words for the counts in both.
"""
from __future__ import annotations

from ...ir import expr as E
from ...ir import kernel_ir as K
from ...dialects.by_name import caps, printer
from ...launch import BLOCK, BufferSpec, KernelArg, KernelSpec
from ...lower.block import LID, block_inclusive_scan, block_reduce, Acc
from ...lower.element import BASE, element, per_thread_loop, declare_base, input_args, rename, variant
from ...ir.stage_specs import ScanSpec
from ..scan import gpu as scan_op

COUNT = K.KVar("survivors", "int64")       # this thread's
INCL = K.KVar("thread_incl", "int64")      # survivors of threads 0..t of the tile
GROUP = K.KThread("group_id")
ONE = K.i64(1)
STAGE = "sh_out"               # shared staging array of output k: sh_out<k>
__all__ = ["lower", "algorithm", "COUNT_GRID"]


# The compaction's algorithm per dialect. Every dialect counts, scans the counts and scatters
# (reduce-then-scan): on an H100 that ran W2 (n = 1e8) in 0.70 ms, where the single-pass
# look-back took 4.9 ms with scan.py's fixed look-back (a chain of group prefixes) and still
# 2.06 ms with its decoupled one (the counts are exact int64 sums): each tile of 256 x 4
# elements pays four device-wide fences and two block barriers of look-back latency
# (docs/performance.md). The look-back lowering stays, chosen by `lower(..., algo=)`, for
# the day a flag and its count travel in one word and tiles grow. (A tuning table, not a
# capability: the look-back needs DialectCaps.forward_progress, which `lower` checks.)
ALGORITHM = {"cuda": "reduce_then_scan", "opencl": "reduce_then_scan", "metal": "reduce_then_scan",
             "webgpu": "reduce_then_scan"}


def algorithm(dialect: str) -> str:
    """"reduce_then_scan" (every dialect today) or "lookback" (on request, where the dialect
    has forward progress)."""
    return ALGORITHM[dialect]


def _counts_scan(name: str, dialect: str, algo: str) -> scan_op._Lower:
    """scan.py's lowering of the int64 sum of the tile counts."""
    acc, item = E.Var("acc", "int64"), E.Var("item", "int64")
    spec = ScanSpec("int64", E.Binary("add", acc, item, "int64"), E.Const(0, "int64"), (), f"{name}_compact")
    runs = scan_op.RUNS["cpu" if printer(dialect).FOLD_RUNS_APART else "gpu"]
    bind = {"in": KernelArg("block_counts", "scratch", "int64", scratch="block_counts"),
            "out": KernelArg("block_incl", "scratch", "int64", scratch="block_incl")}
    lo = scan_op._Lower(spec, runs, bind)
    lo.grid = grid = f"tiles/{lo.tile_size}"
    if algo == "lookback":                       # the look-back's scratch is per compaction tile
        return lo
    # the scan's n is the number of compaction tiles; its num_blocks the count-scan tiles
    lo.bind.update({"n": KernelArg("n", "value", "int64", rule="tiles"),
                    "num_blocks": KernelArg("num_blocks", "value", "int64", rule=grid),
                    "block_aggs": KernelArg("block_aggs", "scratch", "int64", scratch="count_aggs"),
                    "block_carry": KernelArg("block_carry", "scratch", "int64", scratch="count_carry")})
    return lo


def COUNT_GRID(name: str, dialect: str) -> str:
    """The grid rule of the count scan's tile kernels ("tiles/T")."""
    return _counts_scan(name, dialect, algorithm(dialect)).grid


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
def _lookback_kernel(p, prog, strided: bool, ept: int, outs, window, lo_scan, group: int):
    name = p.name
    tile = scan_op.TILE
    start = K.KVar("tile_start", "int64")          # survivors of the tiles before this one
    agg = K.KVar("tile_count", "int64")            # survivors of this tile
    lpos, j, r = K.KVar("lpos", "int64"), K.KVar("j", "int64"), K.KVar("rank", "int64")
    take = [K.Comment("Tiles go to blocks in the order they start (an atomic ticket): every earlier tile\n"
                      "belongs to a running block, so the look-back cannot deadlock."),
            K.If(K.op("==", LID, K.i32(0)), (K.Declare(K.KVar("ticket_no", "uint32"), K.KConst(0, "uint32")),
                                              K.AtomicAdd(K.KVar("ticket_no", "uint32"), "ticket", K.i32(0),
                                                          K.KConst(1, "uint32")),
                                              K.Store("sh_tile", K.i32(0), K.KVar("ticket_no", "uint32")))),
            K.Barrier(),
            K.Declare(tile, K.KCast(K.KLoad("sh_tile", K.i32(0), "uint32"), "int64")),
            K.Declare(BASE, K.op("*", K.op("+", K.op("*", tile, K.i64(BLOCK)), K.KCast(LID, "int64")), K.i64(ept)))]
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
    write = [per_thread_loop(ept, element(prog, strided, prog.outputs) + stage),
             K.Barrier(),
             K.Comment("Coalesced: consecutive threads store consecutive survivors."),
             K.For(j, K.KCast(LID, "int64"), K.op("<", j, agg), K.op("+", j, K.i64(BLOCK)), stores)]
    if window:
        write = [K.Comment("A tile whose survivors all lie outside the window [lo, hi) has nothing to write."),
                 K.If(_window_test(start, K.op("+", start, agg), window), tuple(write))]
    body = (take + _count(prog, strided, ept) + block_inclusive_scan(COUNT, INCL, "sh_scan")
            + [K.Declare(agg, K.KLoad("sh_scan", K.i32(BLOCK - 1), "int64"))]
            + lo_scan.look_back(group, agg)
            + [K.Barrier(),
               K.Declare(start, K.KLoad("sh_carry", K.i32(0), "int64")),
               K.If(_is_last(tile), (K.Store("total", K.i32(0), _total(K.op("+", start, agg), window)),)),
               K.Comment("Stage this thread's survivors at their offsets in the tile."),
               K.Declare(lpos, K.op("-", INCL, COUNT))]
            + write)
    args = (tuple(input_args(prog, strided)) + (KernelArg("n", "n", "int64"), KernelArg("num_blocks", "value", "int64"))
            + tuple(lo_scan.bind.get(nm) or KernelArg(nm, "scratch", scan_op._SCRATCH[nm] or "int64", scratch=nm)
                    for nm in ("block_aggs", "block_incl", "block_flags", "ticket"))
            + (KernelArg("total", "scratch", "int64", scratch="total"),) + outs)
    shared = (K.SharedArray("sh_scan", "int64", BLOCK), K.SharedArray("sh_tile", "uint32", 1),
              K.SharedArray("sh_carry", "int64", 1), K.SharedArray("sh_state", "int32", 1),
              *(K.SharedArray(f"{STAGE}{k}", a.dtype, BLOCK * ept) for k, a in enumerate(outs)))
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


def lower(p, dialect: str, ept: int, outs: tuple, window, group: int = scan_op.LOOKBACK,
          algo: str | None = None):
    """(kernels, specs, scratch BufferSpecs) of pass `p`'s compaction in `dialect` (the window's
    lo, hi are params of the pass, among input_args already); `algo`: "lookback" (CUDA) or
    "reduce_then_scan", default the dialect's (ALGORITHM)."""
    prog = p.program
    algo = algo or algorithm(dialect)
    if algo == "lookback" and not caps(dialect).forward_progress:
        raise ValueError(f"{dialect} has no look-back (no forward-progress guarantee between blocks)")
    lo_scan = _counts_scan(p.name, dialect, algo)
    kernels, specs = [], []

    def add(kernel, grid, variant_, role):
        kernels.append(kernel)
        specs.append(KernelSpec(kernel.name, kernel.args, grid, variant_, role))

    if algo == "lookback":
        add(lo_scan.init(), "one", "any", "init")
        for strided in (False, True):
            add(_lookback_kernel(p, prog, strided, ept, outs, window, lo_scan, group), "tiles",
                "strided" if strided else "contiguous", "scatter")
        scratch = (BufferSpec("block_aggs", "int64", "blocks"), BufferSpec("block_incl", "int64", "blocks"),
                   BufferSpec("block_flags", "uint32", "blocks"), BufferSpec("ticket", "uint32", "one"))
    else:
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
