"""What every stage op's GPU lowering hands back to `gpu.render`."""
from __future__ import annotations

from typing import NamedTuple

from ..launch import BufferSpec, KernelSpec, ResultSlot


class GpuKernels(NamedTuple):
    """One pass lowered into kernel IR: `gpu.render` prints `kernels` and wraps the rest in a
    launch.KernelSet (the runtimes' contract)."""
    elems_per_thread: int
    kernels: list                               # kernel_ir.Kernel, in launch order
    specs: list[KernelSpec]
    outputs: tuple[BufferSpec, ...]
    scratch: tuple[BufferSpec, ...] = ()
    result_slots: tuple[ResultSlot, ...] = ()
