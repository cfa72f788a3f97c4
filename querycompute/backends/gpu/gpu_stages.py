"""GPU column operations between fused passes (stage_runtime.StageRuntime) for the opencl,
cuda and webgpu backends (webgpu_stages.py): sort / top-k / distinct / gather kernels of
ops/sort/gpu.py and ops/sort/topk_gpu.py, the scan of ops/scan/gpu.py and the group_by of
ops/group/gpu.py, run by the launch loop every GPU runtime shares (gpu_launch.LaunchLoop).
Columns are host numpy arrays or device columns (device_columns.py); results stay where the
inputs are, so a staged plan's columns never leave the device between stages.

One `GpuStages` per device runtime kind. Per operation and signature (spec, index type) it
renders the KernelSet once, builds it through the backend's own compile + disk-cache path
(opencl_device.cached_program, cuda_compile.cached_binaries) and keeps a LaunchLoop, whose
buffers, plan and bound arguments are reused by calls of the same n. Columns come in and go
out as host numpy arrays (or device columns); within one operation every intermediate buffer (digit counts,
ping-pong keys and indices, top-k candidates, distinct's permutation) stays on the device.

Keys travel as their order_keys.bits_dtype (float32 as uint32, bool as uint8, ...): buffers
are untyped on the device and the kernels compute the order bits from the raw bits. Index
payloads are int32 when the column has fewer than 2**31 rows, else int64; the protocol's
permutations are int64.

Which algorithm (`sort`): n <= TILE (1024) rows: the one-block sort; a top-k with k < n and
k <= topk.MAX_K (= TILE): radix select + compaction + one-block sort of the k candidates
(never a full sort); otherwise the multi-pass radix sort (then its first k).
`sort_values` is the protocol's default: the permutation, then a gather.

What the dialect has decides the rest (`dialect_caps`: _codegen/capabilities.py),
never its name. A dialect without 64-bit values (DialectCaps.int64 False: WGSL) holds element
values in their own type in these kernels, so an operation on a 64-bit column (a group_by's
int64 sum of int32 or float64 mean, a scan in int64, int64 keys) runs on the numpy reference
(stage_runtime.NumpyStages) and its trace row says so (dialect "numpy"): never a silently
truncated result; its join runs on the host too (join_gpu.without_join), and group_by skips
the low-cardinality tables (they count in int64).
"""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np

from querycompute._codegen import dtypes as D
from querycompute._codegen import order_keys
from querycompute._codegen.dialects import by_name
from querycompute._codegen.launch import KernelSet
from querycompute._codegen.ops.sort import gather_gpu as gather_op
from querycompute._codegen.ops.sort import gpu as sort_op
from querycompute._codegen.ops.sort import topk_gpu as topk_op
from querycompute._codegen.ops.sort.ir import TILE
from querycompute._codegen.ir.stage_specs import GroupSpec, ScanSpec, SortSpec

from . import device_columns as DC
from ..base import KernelRun
from ...artifacts import ArtifactCache
from .gpu_launch import DeviceRuntime, LaunchLoop
from ..stage_runtime import NumpyStages, StageCaps, StageRuntime

__all__ = ["GpuStages", "opencl_stages", "cuda_stages", "index_dtype"]

# ks -> (runtime for its built program, "disk" / "compiled", compile ms)
Builder = Callable[[KernelSet], tuple[DeviceRuntime, str, float]]


def index_dtype(n: int) -> str:
    """The index payload type for columns of n rows."""
    return "int32" if n < 2 ** 31 else "int64"


def _bits(col):
    """The column's raw bits, as the kernels read keys and gathered columns (a host array or
    a device column: device_columns.py)."""
    return DC.bits(col, order_keys.bits_dtype(str(col.dtype)))


def _device(cols) -> bool:
    """Whether results stay on the device: they do where the inputs are device columns."""
    return any(DC.on_device(c) for c in cols)


def _wide(dtypes) -> bool:
    return any(D.bits(str(d)) == 64 for d in dtypes)


class _Entry:
    __slots__ = ("loop", "origin", "compile_ms")

    def __init__(self, loop, origin, compile_ms):
        self.loop, self.origin, self.compile_ms = loop, origin, compile_ms


class GpuStages(StageRuntime):
    """Column operations of one GPU dialect, on the device `build` compiles for. Results
    stay on the device when the inputs are device columns (`_device`); `device_columns`
    (given by opencl_stages / cuda_stages: `caps.device_columns`) tells pipeline.py to leave a
    pass's outputs there."""
    caps: StageCaps          # per instance (__init__): from the dialect's DialectCaps and the device

    def __init__(self, dialect: str, build: Builder, upload: Callable | None = None,
                 device_columns: bool = False):
        from querycompute._codegen.ops.join.gpu import without_join
        self.name = self.dialect = dialect
        self.dialect_caps = by_name.caps(dialect)      # what the dialect has (module doc)
        self.caps = StageCaps(
            device_columns=device_columns,
            # the join's pairs and gathers on the device (gpu_join.py), where the dialect has
            # the join's 64-bit counts and offsets (else the host reference: ops/join/gpu.without_join)
            device_join=without_join(dialect) is None,
            # a pass after a scan runs in the scan's last pass (ops/scan/fused_gpu.py)
            scan_fused_passes=True,
            # group_by tries the low-cardinality tables first (gpu_group_table.py; the sort
            # path on overflow): they count in int64, so where the dialect has 64-bit values
            group_tables=self.dialect_caps.int64)
        self._build = build
        self._upload = upload              # host array -> device column (device_columns)
        self._entries = ArtifactCache(f"{dialect}: column-operation launch loops")   # key -> _Entry
        self._lock = threading.Lock()        # one run at a time: the loops share buffers

    # ---- plumbing --------------------------------------------------------------------------
    def _entry(self, key: tuple, render: Callable[[], KernelSet]) -> tuple[_Entry, bool]:
        hit = self._entries.get(key)
        if hit is not None:
            return hit, False
        ks = render()
        rt, origin, ms = self._build(ks)
        t0 = time.perf_counter()
        loop = LaunchLoop(ks, rt)      # (webgpu's pipelines: the driver compiles the shader here)
        ms += (time.perf_counter() - t0) * 1e3
        hit = self._entries.put(key, _Entry(loop, origin, ms))
        return hit, True

    def _run(self, key, render, inputs, params, n: int, rows: list, keep: bool = False) -> tuple:
        with self._lock:
            entry, first = self._entry(key, render)
            entry.loop.keep = keep
            try:
                raw, launches, tokens = entry.loop.run(inputs, list(params), n)
            finally:
                entry.loop.keep = False
            self._rows(entry, first, launches, tokens, rows)
        return raw

    def _rows(self, entry: _Entry, first: bool, launches, tokens, rows: list) -> None:
        """One KernelRun per launch (the compile's origin and time on the first of a new entry)."""
        cache, compile_ms = (entry.origin, entry.compile_ms) if first else ("memory", 0.0)
        for launch, token in zip(launches, tokens):
            rows.append(KernelRun(launch.name, self.dialect, (launch.grid,), (launch.block,), cache,
                                  compile_ms, entry.loop.rt.elapsed_ms(token)))
            compile_ms = 0.0

    def to_device(self, cols: Sequence) -> list:
        """Host columns copied to the device once, for a plan whose first stage is a column
        operation (its kernels then read and hand on device columns, as after a pass)."""
        if self._upload is None:
            return list(cols)
        return [c if DC.on_device(c) else self._upload(np.ascontiguousarray(c)) for c in cols]

    def holds(self, dtypes) -> bool:
        """Whether the dialect's kernels hold values of `dtypes` (module doc: a dialect without
        64-bit values runs operations on 64-bit columns on the numpy reference)."""
        return self.dialect_caps.int64 or not _wide(dtypes)

    # ---- StageRuntime ----------------------------------------------------------------------
    def sort(self, spec: SortSpec, keys: Sequence[np.ndarray], k: int | None, rows: list) -> np.ndarray:
        if not self.holds(spec.key_dtypes):
            return NumpyStages.sort(self, spec, keys, k, rows)
        bits = [_bits(key) for key in keys]
        _check_keys(spec, keys)
        n = len(bits[0])
        take = n if k is None else max(0, min(int(k), n))
        if take == 0:
            return np.zeros(0, np.int64)
        idx = index_dtype(n)
        keep = _device(keys)
        if take < n and n > TILE and take <= topk_op.MAX_K:
            perm = self._run(("topk", spec, idx), lambda: topk_op.render_topk(spec, self.dialect, idx),
                             bits, [take], n, rows, keep)[0][:take]
        else:
            perm = self._run(("sort", spec, idx), lambda: sort_op.render_sort(spec, self.dialect, idx),
                             bits, [], n, rows, keep)[0][:take]
        return perm if keep else perm.astype(np.int64)     # on the device: the index type

    def gather(self, cols: Sequence[np.ndarray], perm: np.ndarray, rows: list) -> list:
        if not self.holds(c.dtype for c in cols):
            return NumpyStages.gather(self, cols, perm, rows)
        if not cols:
            return []
        m = len(perm)
        if m == 0:
            return [np.empty(0, c.dtype) for c in cols]
        bits = [_bits(c) for c in cols]
        idx = index_dtype(max(len(c) for c in cols))
        dtypes = tuple(str(b.dtype) for b in bits)
        if DC.on_device(perm) and perm.dtype != np.dtype(idx):
            perm = DC.to_host(perm)
        raw = self._run(("gather", dtypes, idx), lambda: gather_op.render_gather(dtypes, self.dialect, idx),
                        bits + [DC.contiguous(perm, dtype=idx)], [], m, rows, _device(list(cols) + [perm]))
        return [r.view(c.dtype) for r, c in zip(raw, cols)]

    def reverse(self, cols: Sequence, rows: list) -> list:
        """The columns in reverse order, by the reverse kernel (device columns stay there)."""
        if not self.holds(c.dtype for c in cols):
            return NumpyStages.reverse(self, cols, rows)
        n = len(cols[0]) if cols else 0
        if n == 0:
            return [c[0:0] for c in cols]
        bits = [_bits(c) for c in cols]
        dtypes = tuple(str(b.dtype) for b in bits)
        raw = self._run(("reverse", dtypes), lambda: gather_op.render_reverse(dtypes, self.dialect),
                        bits, [], n, rows, _device(list(cols)))
        return [r.view(c.dtype) for r, c in zip(raw, cols)]

    def join(self, left_keys, right_keys, outer: bool, rows: list) -> tuple:
        """The device hash join of gpu_join.py (LINQ's order, ops/join/reference.join_reference's pairs)."""
        from .gpu_join import join
        return join(self, left_keys, right_keys, outer, rows)

    def semi_join(self, left_keys, right_keys, rows: list):
        """The device join's build and counts, a flag per row (gpu_join.member)."""
        from .gpu_join import member
        return member(self, left_keys, right_keys, rows)

    def gather_filled(self, cols: Sequence, idx, rows: list) -> list:
        """[col[idx]] with idx -1 giving the dtype's fill value (left_join), on the device."""
        from .gpu_join import gather_filled
        return gather_filled(self, cols, idx, rows)

    def first_occurrence(self, spec: SortSpec, keys: Sequence[np.ndarray], rows: list) -> np.ndarray:
        if not self.holds(spec.key_dtypes):
            return NumpyStages.first_occurrence(self, spec, keys, rows)
        bits = [_bits(key) for key in keys]
        _check_keys(spec, keys)
        n = len(bits[0])
        if n == 0:
            return np.zeros(0, dtype=bool)
        idx = index_dtype(n)
        return self._run(("distinct", spec, idx),
                         lambda: sort_op.render_sort(spec, self.dialect, idx, distinct=True),
                         bits, [], n, rows, _device(keys))[0]

    def scan(self, spec: ScanSpec, values: np.ndarray, params: Sequence, rows: list) -> np.ndarray:
        if not self.holds([spec.dtype] + [p.dtype for p in spec.params]):
            return NumpyStages.scan(self, spec, values, params, rows)
        try:
            from querycompute._codegen.ops.scan import gpu as scan_op
            from .gpu_scan import run_scan
        except ImportError as exc:      # the scan kernels are another module's (ops/scan/gpu.py)
            raise NotImplementedError(f"GPU scan kernels are not available: {exc}") from None
        with self._lock:
            entry, first = self._entry(("scan", spec), lambda: scan_op.render(spec, self.dialect))
            entry.loop.keep = _device([values])
            try:
                out, launches, tokens = run_scan(entry.loop, spec, values, params)
            finally:
                entry.loop.keep = False
            self._rows(entry, first, launches, tokens, rows)
        return out

    def group_by(self, spec: GroupSpec, keys: Sequence[np.ndarray], values: Sequence, params: Sequence,
                 rows: list) -> tuple:
        """Sort-based group_by of ops/group/gpu.py: one kernel set (the radix sort of the
        keys, head flags, a segmented reduce-then-scan); only the groups come back. With
        `caps.group_tables` the low-cardinality tables (gpu_group_table.py) run first and this
        runs only when they overflow (> 4096 groups)."""
        if not self.holds(list(spec.key_dtypes) + [a.dtype for a in spec.aggs if a.op != "count"]
                          + [p.dtype for p in spec.params]):
            return NumpyStages.group_by(self, spec, keys, values, params, rows)
        from querycompute._codegen.ops.group import gpu as group_op
        _check_keys(spec, keys)
        n = len(keys[0])
        vals = [DC.contiguous(v if not DC.on_device(v) or v.dtype == np.dtype(a.dtype) else DC.to_host(v),
                              dtype=a.dtype) for a, v in zip(spec.aggs, values) if a.op != "count"]
        if any(len(v) != n for v in vals):
            raise ValueError(f"{spec.name}: value columns differ in length from the keys")
        if n == 0:
            return ([np.empty(0, k.dtype) for k in keys],
                    [np.empty(0, a.dtype) for a in spec.aggs], np.empty(0, np.int64))
        if self.caps.group_tables:
            from .gpu_group_table import run as run_tables
            hit = run_tables(self, spec, [_bits(k) for k in keys], vals, params, n, rows)
            if hit is not None:
                return hit
        idx = index_dtype(n)
        raw = self._run(("group", spec, idx), lambda: group_op.render_group(spec, self.dialect, idx),
                        [_bits(k) for k in keys] + vals, params, n, rows)
        m = len(keys)
        counts = raw[-1]
        outs, at = [], m
        for a in spec.aggs:
            if a.op == "count":
                outs.append(counts.copy())
            else:
                outs.append(raw[at])
                at += 1
        return [r.view(k.dtype) for r, k in zip(raw[:m], keys)], outs, counts


def _check_keys(spec, keys) -> None:
    got = tuple(str(k.dtype) for k in keys)
    if got != tuple(spec.key_dtypes):
        raise TypeError(f"{spec.name}: key columns are {got}, the SortSpec says {spec.key_dtypes}")
    if len({len(k) for k in keys}) != 1:
        raise ValueError(f"{spec.name}: key columns differ in length")


# ---- instances -----------------------------------------------------------------------------
def opencl_stages(dev=None) -> GpuStages:
    """GpuStages on the OpenCL device (opencl_device.open_device() unless given)."""
    from ..opencl.opencl import OpenCLRuntime
    from ..opencl.opencl_device import cached_program, open_device
    from ...errors import QueryError
    dev = dev or open_device()

    def build(ks: KernelSet):
        if "cl_khr_fp64" in ks.source and not dev.has_fp64:
            raise QueryError(f"float64 is not supported by the OpenCL device {dev.description}")
        t0 = time.perf_counter()
        program, origin = cached_program(dev, ks.source, ks.options, [k.name for k in ks.kernels])
        return OpenCLRuntime(dev, program), origin, (time.perf_counter() - t0) * 1e3

    def upload(host: np.ndarray):
        buf = dev.cl.Buffer(dev.context, dev.cl.mem_flags.READ_WRITE, max(host.nbytes, 1))
        if host.nbytes:
            DC.TRANSFERS["to_device"] += 1
            dev.cl.enqueue_copy(dev.queue, buf, host, is_blocking=True)
        return DC.ClColumn(dev.cl, dev.queue, buf, len(host), host.dtype)

    # ClColumns between a staged plan's stages (OpenCLBackend.caps.device_columns)
    return GpuStages("opencl", build, upload, device_columns=OpenCLRuntime.device_columns)


def cuda_stages(backend=None) -> GpuStages:
    """GpuStages on CuPy's current CUDA device (BackendUnavailableError without one)."""
    from ..cuda.cuda import CudaBackend, CudaRuntime, pick_image
    from ..cuda.cuda_compile import cached_binaries, targets
    from ...errors import BackendUnavailableError
    backend = backend or CudaBackend()

    def build(ks: KernelSet):
        import cupy as cp
        device = backend.device()
        t0 = time.perf_counter()
        # cached_binaries names the cache entry after a pass and its input dtypes
        named = SimpleNamespace(name=ks.pass_name, program=SimpleNamespace(inputs=()))
        binaries, origin, _ = cached_binaries(named, ks, targets(device.arch))
        image = pick_image(binaries, device.arch)
        if image is None:
            raise BackendUnavailableError(f"no CUDA image of {ks.pass_name} loads on {device.description}")
        module = cp.cuda.function.Module()
        module.load(image[1])
        functions: dict[Any, Any] = {k.name: module.get_function(k.name) for k in ks.kernels}
        functions[None] = module          # keeps the module alive
        return CudaRuntime(cp, functions), origin, (time.perf_counter() - t0) * 1e3

    def upload(host: np.ndarray):
        import cupy as cp
        return cp.asarray(host)

    # CuPy arrays between a staged plan's stages
    return GpuStages(CudaBackend.dialect, build, upload, device_columns=CudaBackend.caps.device_columns)
