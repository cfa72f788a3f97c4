"""The home of "scan": the inclusive running fold of a ScanSpec (ir/stage_specs.py),
out[i] = combine(..combine(combine(seed, x0), x1).., xi), with the user's combine
(DESIGN.md section 2, "one home per algorithm").

    part        file              what it holds
    GPU         gpu.py            tiles of BLOCK * ept elements, thread fold + block scan +
                                  downsweep; reduce-then-scan across blocks
                lookback_gpu.py   the single pass with a decoupled look-back (dialects with
                                  forward progress: CUDA)
                fused_gpu.py      a scan fused with the pass after it (the scanned column is
                                  never stored)
                names.py          the kernel-IR names the GPU kernels share
    CPU         cpu.py            numba text of the two-pass scan over fixed chunks (chunk
                                  totals, carries, then each chunk from its carry)
                fused_cpu.py      the cpu scan fused with the pass after it
    reference   reference.py      recursive doubling over whole arrays (the numpy backend)

Every version applies combine in element order with the seed once at the front (the left
operand always holds the earlier elements, so a non-commutative combine works), and groups
elements by n alone, so a float scan's bits do not depend on threads. A combine not known
associative runs as LINQ's running fold, one element after another.
"""
