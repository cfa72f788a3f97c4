"""What a dialect has, declared once by the dialect (DESIGN.md section 2: capabilities are
declared, not probed).

Every dialect states its capabilities in one `DialectCaps`: the class attribute `CAPS` of its
printer (dialects/cuda.py, opencl.py, metal.py, wgsl.py) and `numba_py.CAPS` for the numba
dialect; dialects/by_name.py finds a GPU dialect's by its name. The ops and the stage runtimes
read these fields, never a dialect's name, so a new dialect declares its CAPS and every
algorithm choice follows. How a dialect *spells* something (a barrier, a shuffle, an atomic
add) is its printer's table, not a capability.

    field             read by                           what it decides
    int64             gpu.render, ops/scan/fused_gpu.py,    the pass check (a 64-bit value is
                      ops/rows/gpu.py, ops/reduce/,     refused with its type named), NumPy's
                      ops/join/gpu.py, GpuStages        wide sums of narrow values in two
                                                        32-bit words, the device join, the
                                                        group tables, the numpy reference for
                                                        column operations on 64-bit columns,
                      ops/compact/gpu.py                the one-pass compaction's 64-bit tile
                                                        status word (with forward_progress)
    float64           gpu.render, ops/scan/fused_gpu.py     captured float64 values cast on the host
    forward_progress  ops/scan/gpu.py (ops/scan/fused_gpu.py    single-pass look-back scans (a block
                      through it), ops/compact/gpu.py           waits for earlier blocks' values) and
                                                                the one-pass compaction
    shuffles          ops/reduce/gpu.py, ops/scan/fused_gpu.py  sub-group shuffles in block trees
    buffer_atomics    ops/sort/gpu.py                       the sort adds the next pass's counts by
                                                        an atomic add on a plain int32 buffer
    device_fence      ops/reduce/gpu.py                 a reduction in one launch: each block
                                                        publishes its partial, fences, takes an
                                                        atomic ticket, and the last block folds
                                                        the partials; else a finalize kernel
    language          ops/join/gpu.py, ops/rows/gpu.py  how a refusal names the language
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DialectCaps:
    """What one dialect has (module doc); each dialect declares one instance."""
    language: str                   # the language, as messages name it ("WGSL")
    int64: bool = True              # 64-bit integer values; False: int64 / uint64 are only index
                                    # and count types in its kernels (printed 32-bit), and no
                                    # value is 64-bit (WGSL: no float64 either)
    float64: bool = True            # float64 values (double)
    forward_progress: bool = False  # a block may wait for an earlier block's result: the
                                    # single-pass look-back scans (CUDA); else reduce-then-scan
    shuffles: bool = False          # sub-group shuffles (its printer's SHUFFLE_DOWN spells them)
    buffer_atomics: bool = False    # an atomic add on a plain int32 buffer (its printer's
                                    # ATOMIC_ADD; WGSL's needs atomic<i32> buffer types instead)
    device_fence: bool = False      # a device-scope fence (its printer's FENCE) that, with an
                                    # atomic add (ATOMIC_ADD) on an int32 counter and volatile
                                    # reads (VOLATILE), lets the block that draws the last ticket
                                    # read every other block's plain stores of the same launch
                                    # (CUDA __threadfence, OpenCL mem_fence); Metal before MSL
                                    # 3.2 and WGSL have no device-scope fence
