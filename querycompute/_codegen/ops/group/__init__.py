"""The home of "group_by": the groups of a GroupSpec's key columns in ascending key order
(NaN last), each with its aggregates (sum, min, max, any, all, first, count, fold) over its
rows in source order (DESIGN.md section 2, "one home per algorithm").

    part        file              what it holds
    GPU         gpu.py            sort-based: the keys radix-sorted (ops/sort), runs of equal
                                  keys, a deterministic segmented reduction per aggregate
                ir.py             the lanes (segmented folds) and the ordered block scan
                table_gpu.py      few groups (<= 4096): per-chunk private hash tables merged
                                  in a fixed order; an overflow falls back to gpu.py's path
    CPU         cpu.py            numba text per GroupSpec: per-chunk hash tables of the keys'
                                  order bits, partial aggregates merged in chunk order
                fused_cpu.py      the same fused with the pass before it (TPC-H Q1's shape):
                                  rows are aggregated as they are computed, never stored
                cpu_kernels.py    the generic numba kernels every group module uses (compiled
                                  once per machine: id merging, key ordering)
    reference   reference.py      a stable sort of the keys, runs of equal keys, each
                                  aggregated with the host combine's rule (combine.segments)

Groups, their order and every aggregate's grouping depend only on the input, never on the
thread count: float sums have fixed bits on each runtime.
"""
