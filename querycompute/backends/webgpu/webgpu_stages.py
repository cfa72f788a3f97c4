"""The webgpu backend's column operations between fused passes (order_by, take/top-k, distinct,
scan, group_by, gathers): gpu_stages.GpuStages with the WGSL printer and the wgpu runtime.

The kernels are those of ops/sort/gpu.py, ops/sort/topk_gpu.py, scan.py and group.py printed as WGSL
(the same kernel IR the CUDA / OpenCL / Metal kernels come from); each kernel set becomes a
shader module through the disk cache (webgpu_device.cached_module) and runs under the shared
launch loop on a WebGPURuntime, like a pass.

64-bit columns. WGSL has no 64-bit types (its DialectCaps says int64=False), and these kernels
hold element values in their own type (the pass kernels' two-word sums do not apply here).
Passes on webgpu never produce float64 / int64 values, but an operation can still need them:
a group_by's sum of int32 (NumPy: int64) or mean (float64), a scan in int64. GpuStages runs
such an operation on the numpy reference (stage_runtime.NumpyStages) for any dialect without
64-bit values, and its trace row says so (dialect "numpy"): never a silently truncated
result, never a silent fallback. A group_by's wide sums receive their values in their own
narrow type (the pass cannot store 64-bit columns: group_narrow.py) and the reference widens
them as it sums (ops/group/reference.group_reference).
"""
from __future__ import annotations

import time

from querycompute._codegen.launch import KernelSet

from ..gpu.gpu_stages import GpuStages


class WebGPUStages(GpuStages):
    """GpuStages on the WebGPU device: WGSL's differences are its capabilities (GpuStages reads
    them: its StageCaps, from WGSL's DialectCaps, have no device join and no group tables, and
    its columns are host arrays between stages); what is the device's is here (its storage
    bindings: `scan_fusion_fits`)."""
    dev = None               # the WebGPU device (webgpu_stages sets it)

    def scan_fusion_fits(self, n: int) -> bool:
        """Whether a fused scan pass of n elements runs in one storage binding: a pass that
        needs more runs in windows (webgpu_windows.py), which would restart the scan, so
        the scan and the pass run as two stages then (the bound WebGPUPrepared.run_quick
        windows beyond)."""
        from .webgpu import MAX_GATHER_STEP
        from .webgpu_windows import binding_limit
        return self.dev is not None and n * 8 * MAX_GATHER_STEP <= binding_limit(self.dev)


def webgpu_stages(dev=None) -> WebGPUStages:
    """WebGPUStages on the process's WebGPU device (webgpu_device.open_device() unless given)."""
    from .webgpu import WebGPURuntime
    from .webgpu_device import cached_module, open_device
    dev = dev or open_device()

    def build(ks: KernelSet):
        t0 = time.perf_counter()
        module, origin = cached_module(dev, ks.source, [k.name for k in ks.kernels])
        return WebGPURuntime(dev, module, ks), origin, (time.perf_counter() - t0) * 1e3

    stages = WebGPUStages("webgpu", build)
    stages.dev = dev
    return stages
