"""Run a codegen KernelSet through the CPU harness exactly as a GPU runtime would.

Shapes come from `codegen.launch.plan` (the planner the CUDA and OpenCL backends use);
buffers are allocated from `output_sizes` / `scratch_sizes`, arguments bound in
`KernelSpec.args` order, and the raw results returned in the format of
querycompute/backends/base.py, so tests compare them with NumPy directly.

Every output and scratch buffer starts filled with 0xFF bytes (NaN / -1 / true): a kernel that
relies on zeroed memory, or a result slot nobody writes, shows up as a wrong result.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from querycompute._codegen import gpu
from querycompute._codegen.launch import KernelSet, bind, decode_reduce, output_sizes, plan, scratch_sizes
from querycompute._codegen.program import Pass

from . import runner


def poisoned(size: int, dtype: str) -> np.ndarray:
    a = np.empty(size, dtype=dtype)
    a.view(np.uint8)[:] = 0xFF
    return a


def is_contiguous(inputs: Sequence[np.ndarray]) -> bool:
    """One decision for all inputs, as the backends make it."""
    return all(a.strides[0] == a.itemsize or len(a) <= 1 for a in inputs)


def module_for(sets: Sequence[KernelSet], simd_width: int = 32) -> runner.Module:
    """One compiled module holding every kernel of `sets` (all in one dialect): one g++ run.
    `simd_width`: the warp / SIMD-group width the harness emulates (Metal: 8 to 64)."""
    dialects = {ks.dialect for ks in sets}
    if len(dialects) != 1:
        raise ValueError(f"module_for needs kernel sets of one dialect, got {sorted(dialects)}")
    return runner.build([ks.source for ks in sets], dialects.pop(), simd_width=simd_width)


def run_pass(p: Pass, dialect: str, inputs: Sequence[np.ndarray], params: Sequence = (),
             simd_width: int = 32):
    ks = gpu.render(p, dialect)
    return run_kernel_set(ks, module_for([ks], simd_width), inputs, params)


def run_kernel_set(ks: KernelSet, module: runner.Module, inputs: Sequence[np.ndarray],
                   params: Sequence = (), schedule: str = "alternate"):
    """Raw results of the pass for `inputs` (1-D numpy arrays, maybe strided). `schedule` is
    the harness thread schedule (see runner.Kernel.launch)."""
    n = len(inputs[0]) if inputs else 0
    outs = [poisoned(size, b.dtype) for b, size in zip(ks.outputs, output_sizes(ks, n))]
    sizes = scratch_sizes(ks, n)
    scratch = {b.name: poisoned(sizes[b.name], b.dtype) for b in ks.scratch}
    launches = plan(ks, n, is_contiguous(inputs))
    for launch in launches:
        kernel = module.kernel(launch.name)
        if ks.dialect == "metal" and kernel.info.buffer_indices != tuple(range(len(launch.kernel.args))):
            raise AssertionError(f"{launch.name}: [[buffer(i)]] indices {kernel.info.buffer_indices} "
                                 f"do not follow KernelSpec.args order")
        args = bind(launch, inputs, [a.strides[0] // a.itemsize for a in inputs], params, n, outs, scratch)
        kernel.launch(launch.grid, launch.block, args, schedule=schedule)
    if ks.shape == "reduce":
        return decode_reduce(ks, [o[0] for o in outs])
    if ks.shape == "compact":
        total = int(scratch["total"][0]) if launches else 0
        return tuple(o[:total] for o in outs)
    return tuple(outs)
