"""The algorithms, one home each (DESIGN.md section 2): every op's folder holds its algorithm
comment, its GPU lowering (kernel IR, which the dialects spell), its CPU lowering (numba text
or LLVM IR) and its reference (NumPy) side by side, and every runtime calls these.

Stage ops, the terminal of a fused pass (program.Pass.stage_op names it):

    op        home         what it does
    map       map.py       every element stored at its own index (ToArray, no filter)
    compact   compact/     order-preserving stream compaction (ToArray with a filter)
    reduce    reduce/      two-stage reduction of every Agg (Reduce), in one launch where it can

Each opens with its algorithm (what every thread / chunk does, why the result is
deterministic and keeps order), then holds:
  SHAPE                 the launch.KernelSet.shape name of its GPU kernels
  lower_gpu(p, pr)      its kernels in kernel IR (common.GpuKernels); `pr` is the dialect
                        printer, asked only for capabilities (shuffles, CPU-device folding)
  render_numba(mp)      (element function, kernels) as numba source, for the module printer
                        `mp` of dialects/numba_py.py (the llvm dialect, dialects/llvm_ir.py,
                        prints the same steps as LLVM IR)
  describe(p)           the terminal, for the numba module header
and its result decoding. `gpu.render` and `dialects.numba_py.render` dispatch through
STAGE_OPS; the dialects only spell what the ops build. Their reference is the numpy
backend's interpreter (backends/reference/numpy_ref.py over numpy_eval.py; reduce's windows
in reduce/reference.py).

Column operations between passes (ir/stage_specs.py), rendered from their spec rather than a
Pass (each GPU module with `bytes_per_element` for explain()); each folder's __init__ lists
its files:

    op                        home      GPU entry                       CPU           reference
    sort, distinct, top-k,    sort/     gpu.render_sort, topk_gpu.      cpu_kernels   order_keys
    gather, reverse                     render_topk, gather_gpu.render_*
    scan                      scan/     gpu.render (+ fused_gpu)        cpu, fused_cpu reference
    group_by                  group/    gpu, table_gpu                  cpu, fused_cpu, reference
                                                                        cpu_kernels
    join, semi-join           join/     gpu                             cpu_kernels   reference
    long rows                 rows/     gpu                             cpu_kernels   backends/reference/rows.py
"""
from __future__ import annotations

from . import compact, map, reduce

STAGE_OPS = {"map": map, "compact": compact, "reduce": reduce}
