"""Stage op "compact": a ToArray pass with a filter, i.e. order-preserving stream compaction.

Algorithm. The survivors of the filter are written densely, in source order. Where a
survivor goes is the number of survivors before it: a prefix sum of the keep flags. Both
lowerings compute it hierarchically (per chunk of the input, then per element inside the
chunk) and recompute the element rather than store it, so the only intermediate data are
one count per chunk.

GPU (ops/compact/gpu.py): block b owns the tile of BLOCK * ept consecutive elements from
b * tile, thread t of it `ept` consecutive elements, so "tile, then thread, then element" is
source order; the survivors of the tiles before come from a scan of the tile counts: on CUDA
(forward progress, 64-bit words) a single pass with a decoupled look-back over one 64-bit
status word a tile (count, look back, stage in shared memory, coalesced writes; tiles of up
to 4 runs a thread), elsewhere reduce-then-scan (count kernel, ops/scan/gpu.py's three
kernels over the counts, scatter kernel). No atomic appends: the output order is the source
order and the same input gives the same bytes. The count of survivors (in the ToArray window
[lo, hi) if any: window_total) lands in scratch "total", on the device.

CPU (numba, two passes over fixed chunks of CHUNK elements, whatever the thread count; each
entry point takes a range of chunks [c0, c1), which the cpu backend's morsel scheduler hands
to the cores: backends/cpu/morsels.py):
  1. `<pass>_count(c0, c1, scan, n, bits, offsets, ...)`: survivors of each chunk c into the
     caller's offsets[c + 1], and every element's keep flag as one bit of a caller's word
     array (64 per word, n / 8 bytes; CHUNK is a multiple of 64, so chunks share no word);
     with `scan` the offsets are then prefix-summed (offsets[-1] is the total: a call over
     no chunks does only that). The caller allocates outputs of offsets[-1] elements.
  2. `<pass>_write(c0, c1, n, offsets, ...)`: each chunk writes its survivors in order from
     its offset; chunks never overlap, so the order is kept with chunks on any core. Under
     1 survivor in SPARSE, `<pass>_write_sparse` visits only the set bits of the words
     instead (a selective filter's elements are read once, by the count pass).
With a window [lo, hi) the caller allocates max(0, min(offsets[-1], hi) - lo) elements and
`<pass>_window_chunks(offsets, lo, hi)` names the chunks [first, end) that hold survivors of
the window (two binary searches of the monotone offsets); the write pass visits only those,
stores survivor r at r - lo, and leaves a chunk at its first survivor of rank >= hi. So the
work past the count pass is O(window + 2 chunks).

Result decoding: the results are the first `total` elements of every output (GPU: scratch
"total", read back by the runtime; CPU: offsets[-1]).
"""
from __future__ import annotations

from ... import elements
from ...launch import BufferSpec, KernelArg
from ...lower.element import check_name, elems_per_thread
from ...ir.program import Pass
from . import gpu as compact_gpu
from ..common import GpuKernels
from ..map import numba_element, numba_names, output_args

SHAPE = "compact"              # launch.KernelSet.shape of this op's kernels
__all__ = ["SHAPE", "describe", "lower_gpu", "render_numba", "window_total"]


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


# ---- GPU lowering: ops/compact/gpu.py ------------------------------------------------------
def lower_gpu(p: Pass, pr) -> GpuKernels:
    """The compaction kernels in the printer's dialect (ops/compact/gpu.py: single-pass look-back
    on CUDA, reduce-then-scan with a multi-block scan of the tile counts elsewhere); the kernel
    set's elems_per_thread is a thread's share of a tile (ept * compact_gpu.tile_runs)."""
    dialect = pr.name
    prog = p.program
    ept = elems_per_thread([s.dtype for s in prog.inputs] + list(prog.output_dtypes))
    check_name(p.name, "pass")
    outs = output_args(p)
    window = _window_args(p)
    runs = compact_gpu.tile_runs(dialect, ept, prog.output_dtypes, bool(elements.arrays(prog)))
    kernels, specs, scratch = compact_gpu.lower(p, dialect, ept, outs, window, runs)
    outputs = tuple(BufferSpec(a.name, a.dtype, "window" if window else "n") for a in outs)
    return GpuKernels(ept * runs, kernels, specs, outputs, scratch)


# ---- CPU lowering (numba source) ----------------------------------------------------------
def render_numba(mp) -> tuple[str, list[str]]:
    """(element function, entry points): `<pass>_count` and `<pass>_write` (and
    `<pass>_write_sparse`), each over a range of chunks [c0, c1)."""
    element_fn = numba_element(mp)
    outs, elems, call, unpack, out_args = numba_names(mp)
    count = (f"{mp.jits['entry']}\n"
             f"def {mp.p.name}_count({mp.a('c0, c1, scan, n, bits, offsets')}):\n"
             f'    """Compaction pass 1 over chunks [c0, c1): survivors of chunk c into\n'
             f"    offsets[c + 1]; bits[k] gets the keep flags of elements 64k.. as bits (no\n"
             f"    branch: the loop vectorises; the sparse writer reads them). With `scan`, the\n"
             f"    offsets of all chunks are then prefix-summed, so offsets[c] is where chunk c's\n"
             f'    first survivor goes and offsets[-1] is the total."""\n'
             f"    for c in range(c0, c1):\n"
             f"        cnt = np.int64(0)\n"
             f"        hi = min(n, c * CHUNK + CHUNK)\n"
             f"        for b in range(c * CHUNK, hi, 64):\n"
             f"            word = np.uint64(0)\n"
             f"            for i in range(b, min(hi, b + 64)):\n"
             f"                {unpack} = {call}\n"
             f"                word |= np.uint64(keep) << np.uint64(i - b)\n"
             f"                cnt += np.int64(keep)\n"
             f"            bits[b >> 6] = word\n"
             f"        offsets[c + 1] = cnt\n"
             f"    if scan:\n"
             f"        for c in range(len(offsets) - 1):\n"
             f"            offsets[c + 1] += offsets[c]")
    stores = "".join(f"                {o}[np.uint64(pos)] = {e}\n" for o, e in zip(outs, elems))
    write = (f"{mp.jits['entry']}\n"
             f"def {mp.p.name}_write({mp.a('c0, c1, n, offsets, ' + out_args)}):\n"
             f'    """Compaction pass 2: each chunk of [c0, c1) writes its survivors, in source\n'
             f"    order, from its offset; chunks never overlap, so order is kept.\n"
             f"    Every element is stored at the next free slot and only a survivor\n"
             f"    moves it on (a dropped one is overwritten by the next survivor):\n"
             f"    no branch on `keep`, which mispredicts on real data. The only branch\n"
             f"    stops the stores after the chunk's last survivor, so a chunk never\n"
             f'    writes into the next one\'s slots."""\n'
             f"    for c in range(c0, c1):\n"
             f"        pos = offsets[c]\n"
             f"        end = offsets[c + 1]\n"
             f"        for i in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):\n"
             f"            {unpack} = {call}\n"
             f"            if pos < end:\n"
             f"{stores}"
             f"            pos += np.int64(keep)").rstrip("\n")
    sparse = (f"{mp.jits['entry']}\n"
              f"def {mp.p.name}_write_sparse({mp.a('c0, c1, n, offsets, bits, ' + out_args)}):\n"
              f'    """Compaction pass 2 when few elements survive (the caller picks it under\n'
              f"    1 in SPARSE): only the survivors, found in the count pass's bit words\n"
              f"    (each set bit in turn, by its trailing zeros), compute and store their\n"
              f"    values; the other elements are never read again and cost no branch\n"
              f'    (one per element mispredicts where survivors are scattered)."""\n'
              f"    for c in range(c0, c1):\n"
              f"        pos = offsets[c]\n"
              f"        if pos == offsets[c + 1]:\n"
              f"            continue\n"
              f"        for b in range(c * CHUNK, min(n, c * CHUNK + CHUNK), 64):\n"
              f"            word = bits[b >> 6]\n"
              f"            while word != np.uint64(0):\n"
              f"                i = b + trailing_zeros(word)\n"
              f"                {unpack} = {call}\n"
              f"{stores}"
              f"                pos += 1\n"
              f"                word &= word - np.uint64(1)").rstrip("\n")
    if mp.p.terminal.window is not None:
        windowed = _windowed_write(mp, outs, elems, call, unpack, out_args)
        return element_fn, [_window_chunks(mp), count, windowed]
    return element_fn, [count, write, sparse]


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
            f"    if hi <= lo:\n"
            f"        return first, first      # an empty window holds no survivor anywhere\n"
            f"    return first, max(first, end)")


def _windowed_write(mp, outs, elems, call, unpack, out_args) -> str:
    lo, hi = (f"p_{w}" for w in mp.p.terminal.window)
    stores = "".join(f"                {o}[np.uint64(pos - {lo})] = {e}\n" for o, e in zip(outs, elems))
    return (f"{mp.jits['entry']}\n"
            f"def {mp.p.name}_write({mp.a('c0, c1, n, offsets, ' + out_args)}):\n"
            f'    """Compaction pass 2 for the survivors of rank [{lo}, {hi}): only the chunks of\n'
            f"    [c0, c1) holding some of them are visited; survivor r is stored at r - {lo} (stores\n"
            f"    at the next free slot, moved on by survivors only, as without a window), and a\n"
            f'    chunk is left at its first survivor of rank >= {hi}."""\n'
            f"    first, end = {mp.p.name}_window_chunks(offsets, {lo}, {hi})\n"
            f"    for c in range(max(first, c0), min(end, c1)):\n"
            f"        pos = offsets[c]\n"
            f"        stop = min(offsets[c + 1], {hi})\n"
            f"        for i in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):\n"
            f"            if pos >= stop:\n"
            f"                break\n"
            f"            {unpack} = {call}\n"
            f"            if pos >= {lo}:\n"
            f"{stores}"
            f"            pos += np.int64(keep)")
