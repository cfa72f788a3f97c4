"""Long rows (rows.py) on the GPU backends: the kernel sets of ops/rows/gpu.py run
through the backend's GpuStages (gpu_stages.py: its compile + disk-cache path and the shared
launch loop; webgpu: webgpu_stages.WebGPUStages, the same kernels printed as WGSL). X goes in
as its flat C-ordered buffer (a strided X is copied contiguous first:
the kernels index (i, j) as i * k + j). Results come back as host arrays; the mean's
division and the final dtype casts follow reference/rows._column, so every backend agrees."""
from __future__ import annotations

import time

import numpy as np

from querycompute._codegen.dtypes import mean_dtype, sum_dtype
from querycompute._codegen.ops.rows import gpu as rows_gpu

from ..base import KernelRun, Prepared
from ..reference.rows import _column


def describe(plan) -> str:
    """What explain() says of the GPU strategy (bytes per element included)."""
    item = np.dtype(plan.dtype).itemsize
    if plan.strategy == "column-tiled":
        return (f"GPU: X.{plan.column_kind}(axis=0) tiled: a work-group per (block of {rows_gpu.BLOCK} "
                f"columns, row chunk: up to {rows_gpu.CHUNKS} chunks of >= {rows_gpu.MIN_CHUNK_ROWS} rows), "
                f"one column per thread (coalesced row reads), chunk partials combined in chunk order "
                f"(deterministic); {item} B per element read once, plus the partials "
                f"(<= 2 x {np.dtype(rows_gpu.column_acc(plan.column_kind, plan.dtype)).itemsize} B per "
                f"{rows_gpu.MIN_CHUNK_ROWS} elements)")
    return (f"GPU: one work-group per row, {len(plan.steps)} row step(s) each a strided loop and a "
            f"block tree; {item * len(plan.steps)} B per element ({item} B x {len(plan.steps)} step(s))")


class GpuRows(Prepared):
    """A long-row plan on a GpuStages runtime (opencl, cuda, webgpu, or the CPU harness in tests)."""

    def __init__(self, plan, stages):
        self.plan, self.stages = plan, stages
        self.dialect = stages.dialect
        self.name = "qc_cols" if plan.strategy == "column-tiled" else "qc_rows"
        self._ks = render(plan, self.dialect)
        # keyed by the source: equal plans share one build; an entry never outlives its meaning
        self._key = ("long-rows", self._ks.source)

    def kernel_set(self):
        return self._ks

    def run_quick(self, inputs, params, n):
        t0 = time.perf_counter()
        X = np.asarray(inputs[0])
        p = self.plan
        m, k = X.shape
        flat = np.ascontiguousarray(X).reshape(-1)
        rows: list = []
        if p.strategy == "column-tiled":
            if m == 0:       # nothing to launch: sum -> zeros, min / max / mean raise
                return [_column(p.column_kind, X)], ((time.perf_counter() - t0) * 1e3, (1,), rows)
            raw = self.stages._run(self._key, self.kernel_set, [flat], [m, rows_gpu.chunk_count(m)], k, rows)
            out = np.asarray(raw[0])
            if p.column_kind == "mean":
                acc, res = mean_dtype(p.dtype)
                out = (out.astype(acc) / np.array(m, acc)).astype(res)
            elif p.column_kind == "sum":
                out = out.astype(sum_dtype(p.dtype)[1])
            else:
                out = out.astype(p.dtype)
        else:
            raw = self.stages._run(self._key, self.kernel_set, [flat], [k, *params], m, rows)
            out = np.asarray(raw[0]).reshape(m)
        return [out], ((time.perf_counter() - t0) * 1e3, (max(m, 1),), rows)

    def trace_rows(self, row):
        ms, grid, rows = row
        return rows or [KernelRun(self.name, self.dialect, grid, (), "", 0.0, ms)]


def _param_dtypes(plan):
    """The dtypes of the plan's parameters (the Param nodes of its expressions)."""
    from querycompute._codegen.ir import expr as E
    found = {}
    for e in [st.entry for st in plan.steps] + [plan.final]:
        for node in E.walk(e):
            if isinstance(node, E.Param):
                found[node.name] = node.dtype
    return [found[p] for p in plan.params]


def render(plan, dialect: str):
    """The plan's KernelSet in `dialect` (cuda, opencl, metal, webgpu); needs no device."""
    if plan.strategy == "column-tiled":
        return rows_gpu.render_columns(plan.column_kind, plan.dtype, dialect, "qc_cols")
    dts = tuple(_param_dtypes(plan))
    return rows_gpu.render_rows(plan.steps, plan.final, plan.dtype, plan.params, dts, dialect, "qc_rows")


def prepare(plan, rt) -> GpuRows:
    """The long-row plan's kernels on the GPU whose StageRuntime is `rt`."""
    return GpuRows(plan, rt)
