"""Running a GPU scan (querycompute/_codegen/ops/scan/gpu.py) through the shared launch loop.

For GpuStages.scan (backends/gpu_stages.py), per (spec, dialect) once:
    ks = scan_op.render(spec, dialect)            # KernelSet, shape "scan"
    program = <build ks.source with ks.options>   # as for a pass's KernelSet
    loop = gpu_launch.LaunchLoop(ks, <the dialect's DeviceRuntime for program>)
then per call:
    out, launches, tokens = run_scan(loop, spec, values, params)
`out` is a host array of len(values) elements; (launches, tokens) make trace rows as in
GpuPrepared.trace_rows (`loop.rt.elapsed_ms(token)`). `launch.plan` shapes the launches
(n == 0 launches nothing); the loop keeps its buffers, plan and bound arguments between
calls of the same n, like a pass's. One call at a time per loop.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from querycompute._codegen.ir.stage_specs import ScanSpec

from .gpu_launch import LaunchLoop


def run_scan(loop: LaunchLoop, spec: ScanSpec, values, params: Sequence[Any] = ()) -> tuple:
    """(inclusive scan of `values`, launches, tokens). `values` is converted to spec.dtype
    and made contiguous (the scan kernels read their input densely); `params` follow
    spec.params."""
    from .device_columns import contiguous
    x = contiguous(values, dtype=np.dtype(spec.dtype))
    raw, launches, tokens = loop.run([x], list(params), len(x))
    return raw[0], launches, tokens
