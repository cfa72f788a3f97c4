"""Stage op "compact": a ToArray pass with a filter, i.e. order-preserving stream compaction.

Algorithm. The survivors of the filter are written densely, in source order. Where a
survivor goes is the number of survivors before it: a prefix sum of the keep flags. Both
lowerings compute it hierarchically (per chunk of the input, then per element inside the
chunk) and recompute the element rather than store it, so the only intermediate data are
one count per chunk.

GPU (three kernels). Block b owns the tile of BLOCK * ept consecutive elements starting at
b * tile, and thread t of it owns `ept` consecutive elements of that tile, so "block, then
thread, then element" is source order:
  1. `<pass>_compact_count`: each block counts its survivors -> block_counts[b].
  2. `<pass>_compact_scan` (one block): exclusive prefix sum of block_counts ->
     block_offsets, and the number of survivors -> total[0] (it stays on the device).
  3. `<pass>_compact_scatter`: recompute the predicate, prefix-sum the per-thread counts in
     the block, and write every survivor to block_offsets[b] + thread offset + local rank.
No atomics: the output order is the source order, and the same input gives the same bytes.
With a ToArray window [lo, hi) (program.ToArray): step 2 also gets lo and hi and reports
total = max(0, min(survivors, hi) - lo); step 3 skips every block whose survivors (ranks
block_offsets[b] .. + block_counts[b]) miss the window (block-uniform: no element work
there), stores the survivor of rank r at r - lo only when lo <= r < hi, and a thread stops
at its first survivor of rank >= hi.

CPU (numba, two passes over fixed chunks of CHUNK elements, whatever the thread count):
  1. `<pass>_count_*`: survivors per chunk, prefix-summed into offsets (offsets[-1] is the
     total); the caller allocates outputs of offsets[-1] elements.
  2. `<pass>_write_*`: each chunk writes its survivors in order from its offset; chunks never
     overlap, so the order is kept with chunks in parallel.
With a window [lo, hi) the caller allocates max(0, min(offsets[-1], hi) - lo) elements and
`<pass>_window_chunks(offsets, lo, hi)` names the chunks [first, end) that hold survivors of
the window (two binary searches of the monotone offsets); the write pass visits only those,
stores survivor r at r - lo, and leaves a chunk at its first survivor of rank >= hi. So the
work past the count pass is O(window + 2 chunks).

Result decoding: the results are the first `total` elements of every output (GPU: scratch
"total", read back by the runtime; CPU: offsets[-1]).
"""
from __future__ import annotations

from .. import kernel_ir as K
from ..launch import BLOCK, BufferSpec, KernelArg, KernelSpec
from ..lower_block import LID, Acc, block_inclusive_scan, block_reduce
from ..lower_element import (check_name, declare_base, element, elems_per_thread, input_args, per_thread_loop,
                             rename, variant)
from ..program import Pass
from .common import GpuKernels
from .map import numba_element, numba_names, output_args

SHAPE = "compact"              # launch.KernelSet.shape of this op's kernels
__all__ = ["SHAPE", "describe", "lower_gpu", "render_numba", "window_total"]

COUNT = K.KVar("count", "int64")
GROUP = K.KThread("group_id")
ONE = K.i64(1)


def describe(p: Pass) -> str:
    """The terminal, as the numba module's header names it."""
    window = p.terminal.window
    return "to_array" if window is None else f"to_array of the survivors of rank [{window[0]}, {window[1]})"


SPARSE = 8          # fewer than 1 in SPARSE survivors: the cpu takes the branching writer


def window_total(count: int, lo: int, hi: int) -> int:
    """How many survivors a window [lo, hi) keeps out of `count` (the one definition)."""
    return max(0, min(count, hi) - lo)


def _window_args(p: Pass):
    """(lo, hi) as "param" KernelArgs of a pass with a ToArray window, else None."""
    at = p.window_params
    if at is None:
        return None
    return tuple(KernelArg(f"p_{p.program.params[k].name}", "param", "int64", k) for k in at)


def _kvar(a: KernelArg) -> K.KVar:
    return K.KVar(a.name, a.dtype)


# ---- GPU lowering -------------------------------------------------------------------------
def _count_survivors(prog, strided: bool, ept: int) -> list:
    survivor = element(prog, strided, ()) + [K.Assign(COUNT, K.op("+", COUNT, ONE))]
    return [declare_base(ept), K.Declare(COUNT, K.i64(0)), per_thread_loop(ept, survivor)]


def lower_gpu(p: Pass, pr) -> GpuKernels:
    """The three compaction kernels (count and scatter in contiguous and strided variants)."""
    prog = p.program
    ept = elems_per_thread([s.dtype for s in prog.inputs] + list(prog.output_dtypes))
    name = check_name(p.name, "pass")
    outs = output_args(p)
    counts = KernelArg("block_counts", "scratch", "int64", scratch="block_counts")
    offsets = KernelArg("block_offsets", "scratch", "int64", scratch="block_offsets")
    total = KernelArg("total", "scratch", "int64", scratch="total")
    n = KernelArg("n", "n", "int64")
    window = _window_args(p)
    kernels, specs = [], []

    sum_counts = Acc((COUNT,), (K.i64(0),),
                     lambda src: [K.Assign(COUNT, K.op("+", COUNT, K.Elem(src[0])))])
    for strided in (False, True):
        shared, reduce_stmts = block_reduce([sum_counts], use_shuffles=False)
        stmts = _count_survivors(prog, strided, ept) + reduce_stmts + [
            K.If(K.op("==", LID, K.i32(0)), (K.Store(counts.name, GROUP, COUNT),))]
        args = tuple(input_args(prog, strided)) + (n, counts)
        kname, doc = variant(f"{name}_compact_count", strided, f"{name} compaction step 1: survivors per block.")
        kernels.append(K.Kernel(kname, args, tuple(shared), tuple(stmts), doc=doc))
        specs.append(KernelSpec(kname, args, "tiles", "strided" if strided else "contiguous", "count"))

    kernels.append(_scan_kernel(name, counts, offsets, total, window))
    specs.append(KernelSpec(kernels[-1].name, kernels[-1].args, "one", "any", "scan"))

    for strided in (False, True):
        pos = K.KVar("pos", "int64")
        writes = [K.Store(a.name, pos, K.Elem(rename(e, prog))) for a, e in zip(outs, prog.outputs)]
        stop = []
        if window:
            lo, hi = map(_kvar, window)
            writes = [K.If(K.op("&&", K.op(">=", pos, lo), K.op("<", pos, hi)),
                           tuple(K.Store(w.buffer, K.op("-", pos, lo), w.value) for w in writes))]
            stop = [K.If(K.op(">=", pos, hi), (K.Break(),))]    # the rest of the run is past the window
        writes.append(K.Assign(pos, K.op("+", pos, ONE)))
        incl = K.KVar("incl", "int64")
        stmts = _count_survivors(prog, strided, ept) + block_inclusive_scan(COUNT, incl, "sh_scan") + [
            K.Comment("This thread's survivors go right after those of earlier blocks and threads."),
            K.Declare(pos, K.op("+", K.KLoad(offsets.name, GROUP, "int64"), K.op("-", incl, COUNT))),
            per_thread_loop(ept, stop + element(prog, strided, prog.outputs) + writes)]
        args = tuple(input_args(prog, strided)) + (n, offsets) + outs
        if window:
            stmts = _skip_outside(stmts, offsets, counts, window)
            args = tuple(input_args(prog, strided)) + (n, offsets, counts) + outs
        kname, doc = variant(f"{name}_compact_scatter", strided,
                             f"{name} compaction step 3: recompute, rank and write survivors in order.")
        kernels.append(K.Kernel(kname, args, (K.SharedArray("sh_scan", "int64", BLOCK),), tuple(stmts), doc=doc))
        specs.append(KernelSpec(kname, args, "tiles", "strided" if strided else "contiguous", "scatter"))
    outputs = tuple(BufferSpec(a.name, a.dtype, "window" if window else "n") for a in outs)
    scratch = (BufferSpec("block_counts", "int64", "blocks"), BufferSpec("block_offsets", "int64", "blocks"),
               BufferSpec("total", "int64", "one"))
    return GpuKernels(ept, kernels, specs, outputs, scratch)


def _skip_outside(stmts: list, offsets, counts, window) -> list:
    """`stmts` run only in blocks holding survivors of the window (the condition is the same
    for every thread of the block, so the barriers inside stay block-uniform)."""
    start, end = K.KVar("block_start", "int64"), K.KVar("block_end", "int64")
    lo, hi = map(_kvar, window)
    return [K.Declare(start, K.KLoad(offsets.name, GROUP, "int64")),
            K.Declare(end, K.op("+", start, K.KLoad(counts.name, GROUP, "int64"))),
            K.Comment("A block whose survivors all lie outside the window [lo, hi) has nothing to write."),
            K.If(K.op("&&", K.op(">", end, lo), K.op("<", start, hi)), tuple(stmts))]


def _scan_kernel(name, counts, offsets, total, window=None) -> K.Kernel:
    """One block scans all block counts, a block-sized chunk at a time, carrying the sum."""
    blocks = K.KVar("num_blocks", "int64")
    carry = K.KVar("carry", "int64")
    chunk = K.KVar("chunk", "int64")
    j = K.KVar("j", "int64")
    c = K.KVar("c", "int64")
    incl = K.KVar("incl", "int64")
    in_range = K.op("<", j, blocks)
    body = [K.Declare(j, K.op("+", chunk, K.KCast(LID, "int64"))),
            K.Declare(c, K.KSelect(in_range, K.KLoad(counts.name, j, "int64"), K.i64(0), "int64")),
            *block_inclusive_scan(c, incl, "sh_scan"),
            K.If(in_range, (K.Store(offsets.name, j, K.op("+", carry, K.op("-", incl, c))),)),
            K.Assign(carry, K.op("+", carry, K.KLoad("sh_scan", K.i32(BLOCK - 1), "int64"))),
            K.Barrier()]
    loop = K.For(chunk, K.i64(0), K.op("<", chunk, blocks), K.op("+", chunk, K.i64(BLOCK)), tuple(body))
    result, args = carry, (counts, KernelArg("num_blocks", "value", "int64"), offsets, total)
    if window:          # window_total: max(0, min(carry, hi) - lo)
        lo, hi = map(_kvar, window)
        kept = K.op("-", K.KSelect(K.op("<", carry, hi), carry, hi, "int64"), lo)
        result, args = K.KSelect(K.op(">", kept, K.i64(0)), kept, K.i64(0), "int64"), args + window
    stmts = (K.Comment("Scan the counts a block-sized chunk at a time; carry = total of the earlier chunks."),
             K.Declare(carry, K.i64(0)), loop,
             K.If(K.op("==", LID, K.i32(0)), (K.Store(total.name, K.i32(0), result),)))
    return K.Kernel(f"{name}_compact_scan", args, (K.SharedArray("sh_scan", "int64", BLOCK),), stmts,
                    doc=f"{name} compaction step 2: exclusive scan of the block counts; total survivors.")


# ---- CPU lowering (numba source) ----------------------------------------------------------
def render_numba(mp) -> tuple[str, list[str]]:
    """(element function, entry points): `<pass>_count_*` and `<pass>_write_*`, serial and
    parallel."""
    element_fn = numba_element(mp)
    outs, elems, call, unpack, out_args = numba_names(mp)

    def count(loop: str) -> str:
        rng = "prange" if loop == "parallel" else "range"
        return (f"{mp.jits[loop]}\n"
                f"def {mp.p.name}_count_{loop}({mp.a('n')}):\n"
                f'    """Compaction pass 1: survivors per fixed chunk, prefix-summed, so\n'
                f"    offsets[c] is where chunk c's first survivor goes and offsets[-1]\n"
                f'    is the total."""\n'
                f"    nch = (n + CHUNK - 1) // CHUNK\n"
                f"    offsets = np.zeros(nch + 1, np.int64)\n"
                f"    for c in {rng}(nch):\n"
                f"        cnt = np.int64(0)\n"
                f"        for i in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):\n"
                f"            {unpack} = {call}\n"
                f"            cnt += np.int64(keep)\n"
                f"        offsets[c + 1] = cnt\n"
                f"    for c in range(nch):\n"
                f"        offsets[c + 1] += offsets[c]\n"
                f"    return offsets")

    def write(loop: str) -> str:
        rng = "prange" if loop == "parallel" else "range"
        stores = "".join(f"                {o}[np.uint64(pos)] = {e}\n"
                         for o, e in zip(outs, elems))
        return (f"{mp.jits[loop]}\n"
                f"def {mp.p.name}_write_{loop}({mp.a('n, offsets, ' + out_args)}):\n"
                f'    """Compaction pass 2: each chunk writes its survivors, in source\n'
                f"    order, from its offset; chunks never overlap, so order is kept.\n"
                f"    Every element is stored at the next free slot and only a survivor\n"
                f"    moves it on (a dropped one is overwritten by the next survivor):\n"
                f"    no branch on `keep`, which mispredicts on real data. The only branch\n"
                f"    stops the stores after the chunk's last survivor, so a chunk never\n"
                f'    writes into the next one\'s slots."""\n'
                f"    nch = (n + CHUNK - 1) // CHUNK\n"
                f"    for c in {rng}(nch):\n"
                f"        pos = offsets[c]\n"
                f"        end = offsets[c + 1]\n"
                f"        for i in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):\n"
                f"            {unpack} = {call}\n"
                f"            if pos < end:\n"
                f"{stores}"
                f"            pos += np.int64(keep)").rstrip("\n")
    def sparse(loop: str) -> str:
        rng = "prange" if loop == "parallel" else "range"
        stores = "".join(f"                {o}[np.uint64(pos)] = {e}\n" for o, e in zip(outs, elems))
        return (f"{mp.jits[loop]}\n"
                f"def {mp.p.name}_write_sparse_{loop}({mp.a('n, offsets, ' + out_args)}):\n"
                f'    """Compaction pass 2 when few elements survive (the caller picks it under\n'
                f"    1 in SPARSE): the filter alone decides, a rarely taken branch, and only a\n"
                f"    survivor computes and stores its values, so a dropped element reads only\n"
                f'    what the filter reads; chunks without survivors are skipped."""\n'
                f"    nch = (n + CHUNK - 1) // CHUNK\n"
                f"    for c in {rng}(nch):\n"
                f"        pos = offsets[c]\n"
                f"        if pos == offsets[c + 1]:\n"
                f"            continue\n"
                f"        for i in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):\n"
                f"            if {mp.keep_call()}:\n"
                f"                {unpack} = {call}\n"
                f"{stores}"
                f"                pos += 1").rstrip("\n")
    if mp.p.terminal.window is not None:
        windowed = _windowed_write(mp, outs, elems, call, unpack, out_args)
        return element_fn, [_window_chunks(mp), count("serial"), windowed("serial"), count("parallel"),
                            windowed("parallel")]
    return element_fn, [mp.keep_function(), count("serial"), write("serial"), sparse("serial"),
                        count("parallel"), write("parallel"), sparse("parallel")]


def _window_chunks(mp) -> str:
    return (f"{mp.jits['scalar']}\n"
            f"def {mp.p.name}_window_chunks(offsets, lo, hi):\n"
            f'    """The chunks [first, end) holding survivors of rank lo <= r < hi: chunk c holds\n'
            f"    ranks [offsets[c], offsets[c + 1]) and offsets never decrease, so they are the\n"
            f"    chunks after the last one ending at or before lo, up to the first starting at\n"
            f'    min(hi, total) (so the last one visited holds a survivor of the window)."""\n'
            f"    nch = len(offsets) - 1\n"
            f'    first = np.searchsorted(offsets[1:], lo, side="right")\n'
            f'    end = np.searchsorted(offsets[:nch], min(hi, offsets[nch]), side="left")\n'
            f"    return first, max(first, end)")


def _windowed_write(mp, outs, elems, call, unpack, out_args):
    lo, hi = (f"p_{w}" for w in mp.p.terminal.window)

    def write(loop: str) -> str:
        rng = "prange" if loop == "parallel" else "range"
        stores = "".join(f"                {o}[np.uint64(pos - {lo})] = {e}\n" for o, e in zip(outs, elems))
        return (f"{mp.jits[loop]}\n"
                f"def {mp.p.name}_write_{loop}({mp.a('n, offsets, ' + out_args)}):\n"
                f'    """Compaction pass 2 for the survivors of rank [{lo}, {hi}): only the chunks\n'
                f"    holding some of them are visited; survivor r is stored at r - {lo} (stores\n"
                f"    at the next free slot, moved on by survivors only, as without a window), and a\n"
                f'    chunk is left at its first survivor of rank >= {hi}."""\n'
                f"    first, end = {mp.p.name}_window_chunks(offsets, {lo}, {hi})\n"
                f"    for c in {rng}(first, end):\n"
                f"        pos = offsets[c]\n"
                f"        stop = min(offsets[c + 1], {hi})\n"
                f"        for i in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):\n"
                f"            if pos >= stop:\n"
                f"                break\n"
                f"            {unpack} = {call}\n"
                f"            if pos >= {lo}:\n"
                f"{stores}"
                f"            pos += np.int64(keep)")
    return write
