"""The stage ops: one home per algorithm a pass runs (program.Pass.stage_op names it).

    op        module       what it does
    map       map.py       every element stored at its own index (ToArray, no filter)
    compact   compact.py   order-preserving stream compaction (ToArray with a filter)
    reduce    reduce/      two-stage reduction of every Agg (Reduce)

Each op module opens with its algorithm (what every thread / chunk does, why the result is
deterministic and keeps order), then holds:
  SHAPE                 the launch.KernelSet.shape name of its GPU kernels
  lower_gpu(p, pr)      its kernels in kernel IR (common.GpuKernels); `pr` is the dialect
                        printer, asked only for capabilities (shuffles, CPU-device folding)
  render_numba(mp)      (element function, kernels) as numba source, for the module printer
                        `mp` of dialects/numba_py.py
  describe(p)           the terminal, for the numba module header
and its result decoding. `gpu.render` and `dialects.numba_py.render` dispatch through
STAGE_OPS; the dialects only spell what the ops build.

Column operations between passes (stage_specs.py) have modules here too, rendered from
their spec rather than a Pass (each with `bytes_per_element` for explain()):

    op                    module       rendered by
    scan                  scan.py      render(ScanSpec, dialect)
    sort, distinct        sort.py      render_sort(SortSpec, dialect, index_dtype, distinct=)
    gather, reverse       gather.py    render_gather(bits dtypes, dialect, index_dtype),
                                       render_reverse(bits dtypes, dialect)
    top-k                 topk.py      render_topk(SortSpec, dialect, index_dtype)
    group_by              group.py     (GroupSpec; see its module docstring)
  (sort_ir.py and group_ir.py hold the kernel IR pieces they share.)
"""
from __future__ import annotations

from . import compact, map, reduce

STAGE_OPS = {"map": map, "compact": compact, "reduce": reduce}
