"""Run a codegen KernelSet through the CPU harness exactly as a GPU runtime does: through the
launch loop the CUDA and OpenCL backends share (querycompute/backends/gpu/gpu_launch.py), with
`HarnessRuntime` as its runtime. So shapes come from `codegen.launch.plan`, buffers from
`output_sizes` / `scratch_sizes`, arguments are bound in `KernelSpec.args` order, and the
raw results come back in the format of querycompute/backends/base.py, which tests compare
with NumPy directly.

Every output and scratch buffer starts filled with 0xFF bytes (NaN / -1 / true): a kernel that
relies on zeroed memory, or a result slot nobody writes, shows up as a wrong result.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from querycompute._codegen import gpu
from querycompute._codegen.launch import KernelSet
from querycompute._codegen.ir.program import Pass
from querycompute.backends.gpu.gpu_launch import DeviceRuntime, LaunchLoop

from . import runner


def poisoned(size: int, dtype: str) -> np.ndarray:
    a = np.empty(size, dtype=dtype)
    a.view(np.uint8)[:] = 0xFF
    return a


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


class HarnessRuntime(DeviceRuntime):
    """The CPU harness as a GPU runtime under the backends' shared launch loop: buffers are
    numpy arrays (outputs and scratch poisoned), inputs are read in place with any stride,
    kernels run on CPU threads with the `schedule` given."""

    def __init__(self, ks: KernelSet, module: runner.Module, schedule: str = "alternate"):
        self.ks, self.module, self.schedule = ks, module, schedule

    def view(self, x):
        a = np.asarray(x)
        return a, (a.strides[0] // a.itemsize if len(a) > 1 else 1)

    def in_place(self, x):
        return x

    resident: int | None = None       # blocks "resident at once": caps a reduction's physical grid

    def resident_blocks(self, kernel, block: int):
        return self.resident

    def vector_aligned(self, buf) -> bool:
        # the kernels' wide loads (uint4...) need what a GPU needs; misaligned views go strided
        return buf.ctypes.data % 16 == 0

    def alloc(self, size: int, dtype: str):
        return poisoned(size, dtype)

    def upload(self, buf, host) -> None:
        buf[:] = host

    def kernel(self, spec):
        kernel = self.module.kernel(spec.name)
        if self.ks.dialect == "metal" and kernel.info.buffer_indices != tuple(range(len(spec.args))):
            raise AssertionError(f"{spec.name}: [[buffer(i)]] indices {kernel.info.buffer_indices} "
                                 f"do not follow KernelSpec.args order")
        return [kernel, None]

    def set_args(self, kernel, args) -> None:
        kernel[1] = list(args)

    def set_arg(self, kernel, pos: int, value) -> None:
        kernel[1][pos] = value

    def launch(self, kernel, grid: int, block: int):
        kernel[0].launch(grid, block, kernel[1], schedule=self.schedule)

    def slot_align(self) -> int:
        return 8

    def slot_view(self, buf, offset: int, dtype: str):
        return buf[offset:offset + np.dtype(dtype).itemsize].view(dtype)

    def read(self, buf, count: int, dtype: str, wait: bool):
        return buf[:count].copy()


def run_kernel_set(ks: KernelSet, module: runner.Module, inputs: Sequence[np.ndarray],
                   params: Sequence = (), schedule: str = "alternate"):
    """Raw results of the pass for `inputs` (1-D numpy arrays, maybe strided), run by the
    backends' launch loop (fresh, so every buffer starts poisoned). `schedule` is the
    harness thread schedule (see runner.Kernel.launch)."""
    n = len(inputs[0]) if inputs else 0
    raw, _, _ = LaunchLoop(ks, HarnessRuntime(ks, module, schedule)).run(inputs, params, n)
    return raw
