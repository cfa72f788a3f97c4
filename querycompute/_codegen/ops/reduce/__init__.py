"""Stage op "reduce": a two-stage reduction of every Agg of a Reduce terminal in one pass.

Algorithm. Each aggregate has an accumulator state and a combine that joins the states of
two runs of elements; a dropped element contributes the identity. The input is cut into
pieces whose number and bounds depend only on n, each piece is folded in element order into
a partial state, and the partials are joined in a fixed order. So the same input always
gives the same bits (whatever the thread count), and no atomics touch a value (the one
atomic, below, only counts finished blocks).

GPU, plain shape (gpu.py: `lower_reduce`, `_partials`, `_finalize`). Stage 1
(`<pass>_reduce_partials`, contiguous and strided variants): a grid-stride loop in which
each thread takes runs of `ept` consecutive elements (16-byte wide reads, as the map kernels
do) and folds them in order into private accumulators, then a block reduction; thread 0
writes one partial per block and accumulator slot. Stage 2 (`<pass>_reduce_finalize`, one
block): each thread folds partials t, t + block, ... in order, then the same block reduction
writes the results. The grid depends only on n and every tree has a fixed shape.

GPU, one launch (gpu.py: `last_block_epilogue`), where the dialect declares a device-scope
fence (capabilities.DialectCaps.device_fence: CUDA __threadfence, OpenCL
mem_fence(CLK_GLOBAL_MEM_FENCE); Metal and WGSL have none and keep the two launches). There
is no finalize kernel: at the end of stage 1 (a kernel_ir.Epilogue, after the loop over
logical blocks, so once per physical block) thread 0, whose partials are stored, fences,
draws a ticket by an atomic add on the int32 counter `blocks_done`, fences again, and tells
its block through shared memory whether it drew the last one (num_groups - 1). That block
alone runs stage 2's statements: the same accumulators, the same fold of partials t, t +
block, ... (read through volatile loads: other blocks' stores), the same tree, so the bits
are those of the two launches for the same grid; thread 0 writes the results and sets the
counter back to 0. The counter is a `zeroed` scratch buffer (launch.BufferSpec): the
launch loop clears it once when it allocates it, and every launch leaves it at 0 (launches
of one loop are ordered on one queue/stream). This saves a launch per call: the per-call
cost of a small reduction (docs/performance.md, the GPU section).

GPU, order-keeping shape (gpu.py: `ordered_partials`, `ordered_finalize`; in one launch as
above where the dialect can), taken by a pass with a fold. A fold's combine (LINQ's Aggregate) is associative but may not be commutative
("last non-zero"), so every combine must join the state of earlier elements (left) with the
state of the elements right after them. The plain shape does neither: its grid-stride loop
hands a thread runs that lie a whole grid apart, and its halving trees join thread t with
thread t + BLOCK / 2. Here:
  Stage 1  Block b owns one contiguous segment of the input (whole tiles; every block the
           same number, the last ones fewer or none) and walks it tile by tile. In a tile,
           thread t folds the t-th stretch of TILE_RUNS * ept consecutive elements (runs of
           ept, so contiguous inputs are still read 16 bytes at a time); the doubling tree
           joins the threads' states in thread order, and the tile's state is folded into
           the block's. The other aggregates of the pass (sum, min, ...) need no order: they
           accumulate per thread over the whole segment, and the usual block tree joins them
           once at the end.
  Stage 2  Thread t folds a contiguous range of the partials, the doubling tree joins the
           threads, and each fold's seed is applied once: the seed if nothing survived,
           else combine(seed, total).
The empty state (has = 0) is the identity of a fold's combine (gpu._fold_acc), so empty
segments, tiles past n and filtered-out elements need no special case. Each tile costs one
tree of log2(BLOCK) barrier steps, which TILE_RUNS runs per thread amortise. Only a pass with
a fold pays for this shape; its grid is the plain one (launch.grid_size).

CPU (cpu.py, numba). Fixed chunks of CHUNK elements (whatever the thread count) each return
their partial state; the entry point combines the chunk partials in chunk order (float sums
pairwise, as NumPy's are). cpu.py's doc lists each aggregate's state variables. The llvm
dialect (dialects/llvm_ir.py) prints the same states and the same order as LLVM IR.

Reference (reference.py: the numpy backend's reduce and the host's fold of partials). Over
windows of the input, left to right, each window with whole-array NumPy calls; a float sum
in the cpu kernel's fixed order (sum_order.py), so the numpy tier's sums have its bits.

Result decoding (this module): the GPU kernels write one value per `launch.ResultSlot`;
`decode` turns them into the raw results of querycompute/backends/base.py. The numba entry
points return a flat tuple: `cpu_result_width(agg)` entries per aggregate.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...launch import KernelSet, ResultSlot
from ...ir.program import Agg, Pass
from . import two_words
from .cpu import render_numba
from .gpu import lower_gpu

SHAPE = "reduce"               # launch.KernelSet.shape of this op's kernels
__all__ = ["SHAPE", "cpu_result_width", "decode", "describe", "lower_gpu", "render_numba"]


def describe(p: Pass) -> str:
    """The terminal, as the numba module's header names it."""
    return "reduce " + ", ".join(f"{a.op}:{a.dtype}" for a in p.terminal.aggs)


def decode(ks: KernelSet, slot_values: Sequence[Any]) -> list:
    """Slot values (one numpy scalar per output, as read back) -> raw Reduce results of
    querycompute/backends/base.py: one entry per Agg."""
    by_agg: dict[int, list[tuple[ResultSlot, Any]]] = {}
    for slot, v in zip(ks.result_slots, slot_values):
        by_agg.setdefault(slot.agg, []).append((slot, v))
    results = []
    for agg in sorted(by_agg):
        slots = by_agg[agg]
        role = slots[0][0].role
        if role == "count":
            results.append(int(slots[0][1]))
        elif role == "flag":
            results.append(bool(slots[0][1]))
        elif role == two_words.ROLE:
            results.append(two_words.assemble(slots[0][1], slots[1][1], slots[0][0].wide))
        elif role == "index":
            index = int(slots[0][1])
            found = index != np.iinfo(np.int64).max
            values = tuple(np.dtype(s.dtype).type(v) for s, v in slots[1:])
            results.append((index if found else -1, values))
        else:
            results.append(np.dtype(slots[0][0].dtype).type(slots[0][1]))
    return results


def cpu_result_width(agg: Agg) -> int:
    """How many entries of a numba Reduce entry's result tuple belong to `agg`."""
    return 1 + len(agg.values) if agg.op == "first" else 1
