"""The home of the sort family: sort, top-k, distinct and gather / reverse (DESIGN.md section
2, "one home per algorithm"). They share the order-preserving key transform
(_codegen/order_keys.py: NaN last both ways, -0.0 == 0.0, descending per key) and the radix
machinery built on it.

    part        file              what it holds
    GPU         gpu.py            stable LSD radix sort (8-bit digits, tile sorts in shared
                                  memory, a scan of (digit, tile) counts per pass) and
                                  distinct's first-occurrence flags over the sorted keys
                ir.py             the kernel-IR pieces sort, top-k and distinct share
                topk_gpu.py       radix select of the k smallest, an order-keeping compaction,
                                  a one-block sort of the candidates
                gather_gpu.py     out[i] = col[perm[i]] and out[i] = col[n - 1 - i]
    CPU         cpu_kernels.py    numba text (loaded by backends/cpu/numba_loader.py, never
                                  imported): LSD radix sort over fixed chunks, per-chunk heaps
                                  for top-k, gather, hash-set first occurrence
    reference   order_keys.stable_order / order_keys.first_occurrence (np.lexsort over the
                transform's bits), np.take: backends/stage_runtime.NumpyStages calls them

Every version is stable (ties keep input order) and exact: no thread count or chunking
changes a permutation or a flag. The runtimes (backends/cpu/cpu_stages.py,
backends/gpu/gpu_stages.py) call these; a StageRuntime method per operation (sort, gather,
reverse, first_occurrence) is the only way in.
"""
