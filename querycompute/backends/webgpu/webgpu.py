"""The `webgpu` backend: runs generated WGSL through wgpu-py (Vulkan, Metal, D3D12; lavapipe in CI).

The pass runs through the launch loop every GPU runtime shares (gpu_launch.LaunchLoop: plan,
buffers, argument binding, launches, results); this file is the WebGPU runtime under it.
The device is the process's one (webgpu_device.open_device); the shader module of a kernel
set comes through the disk cache (webgpu_device.cached_module), its compute pipelines are
made once per Prepared (the engine's memo keeps that in memory).

How a launch maps onto WebGPU:
  * buffers: storage buffers reused per size by the loop (inputs are copied in with
    queue.write_buffer; strided inputs as the span they cover, gathered on the device, for
    strides up to MAX_GATHER_STEP, else made contiguous first). 64-bit index / count buffers
    hold i32 on the device (the WGSL dialect has no 64-bit type): `read` widens them, and
    INT32_MAX, the "no index" of `first`, becomes INT64_MAX again;
  * arguments: buffers are bound by the binding numbers of dialects.wgsl
    (`binding_layout`); scalars, with the logical grid size, go in the kernel's scalar
    buffer (read-only storage, not uniform: lavapipe specialises shaders on uniform values
    and then folds float arithmetic with them inexactly), rewritten only when they change;
    the bind group is rebuilt only when a buffer changed;
  * dispatch: grids above the adapter's workgroups-per-dimension limit (65,535) are
    dispatched in 2-D, the kernels number blocks x + y * width and skip the padding;
  * limits: a pass whose buffers would exceed max_storage_buffer_binding_size runs over
    windows of its input (webgpu_windows.py); n >= 2^31 - 1 raises a QueryError saying so;
  * timing: timestamp queries around each compute pass (webgpu_timing.py).
QUERYCOMPUTE_WEBGPU_MAX_GROUPS lowers the per-dimension limit (tests reach the 2-D path with
small inputs).
"""
from __future__ import annotations

import math
import time

import numpy as np

from querycompute._codegen import launch as L
from querycompute._codegen.dialects.wgsl import SCALAR_KINDS, Wgsl, binding_layout, scalar_member_type
from querycompute._codegen.ir.program import Pass

from ... import config
from ...errors import QueryError
from ..base import BackendCaps, Prepared
from ..gpu.generated import DeviceBackend
from ..gpu.gpu_launch import DeviceRuntime, GpuPrepared, LaunchLoop, strided_span
from . import webgpu_timing, webgpu_windows
from .webgpu_device import WebGPUDevice, cached_module, find_gpu_adapter, open_device

MAX_GATHER_STEP = 8
MAX_N = 2 ** 31 - 2                   # indexes are i32; INT32_MAX means "no index"
_MEMBER_NP = {"i32": "<i4", "u32": "<u4", "f32": "<f4"}


def _device_itemsize(dtype: str) -> int:
    """Bytes per element in a device buffer: 64-bit indexes and counts are i32."""
    size = np.dtype(dtype).itemsize
    return 4 if size == 8 else size


def _padded(nbytes: int) -> int:
    return max(4, (nbytes + 3) // 4 * 4)


class _Buffer:
    __slots__ = ("gpu", "size", "dtype")

    def __init__(self, gpu, size: int, dtype: str):
        self.gpu, self.size, self.dtype = gpu, size, dtype


class _Kernel:
    """A compute pipeline with its bound buffers (by binding number) and scalar values."""

    def __init__(self, spec: L.KernelSpec, pipeline, layout, uniform, members):
        self.spec, self.pipeline, self.layout, self.uniform = spec, pipeline, layout, uniform
        self.members = members              # arg position -> numpy dtype of its uniform member
        self.buffers: dict[int, _Buffer] = {}
        self.scalars: dict[int, object] = {}
        self.bind_group = None
        self.written = b""                  # uniform bytes last written


class _Refused:
    """A kernel this adapter can't bind (too many storage buffers): refused when the launch
    loop first binds it, so a kernel set whose other variant fits still runs (a C-contiguous
    array of shaped elements is one buffer in the contiguous variant, m in the gathered one)."""

    def __init__(self, spec: L.KernelSpec, why: str):
        self.spec, self.why = spec, why


class WebGPURuntime(DeviceRuntime):
    def __init__(self, dev: WebGPUDevice, module, ks: L.KernelSet):
        self.dev, self.module, self.ks = dev, module, ks
        self.wgpu = dev.wgpu
        self.buffers, self.uniforms = binding_layout(ks.kernels)
        self.printer = Wgsl()
        env = config.get("QUERYCOMPUTE_WEBGPU_MAX_GROUPS")
        self.max_dim = min(dev.max_groups_per_dim, env) if env else dev.max_groups_per_dim

    # ---- buffers ----------------------------------------------------------------------------
    def view(self, x):
        return strided_span(np.asarray(x), MAX_GATHER_STEP)

    def alloc(self, size: int, dtype: str):
        nbytes = _padded(size * _device_itemsize(dtype))
        limit = webgpu_windows.binding_limit(self.dev)
        if nbytes > limit:          # passes run in windows (webgpu_windows): only a bug lands here
            raise QueryError(
                f"webgpu: a buffer of {size} {dtype} elements ({nbytes >> 20} MiB) exceeds this adapter's "
                f"max_storage_buffer_binding_size ({limit >> 20} MiB); use the cpu / opencl / cuda backend")
        usage = self.wgpu.BufferUsage
        gpu = self.dev.device.create_buffer(size=nbytes, usage=usage.STORAGE | usage.COPY_DST | usage.COPY_SRC)
        return _Buffer(gpu, size, dtype)

    def upload(self, buf, host) -> None:
        data = np.ascontiguousarray(host).view(np.uint8).reshape(-1)
        if len(data) % 4:
            data = np.concatenate([data, np.zeros(4 - len(data) % 4, np.uint8)])
        with self.dev.lock:
            self.dev.queue.write_buffer(buf.gpu, 0, data)

    def read(self, buf, count: int, dtype: str, wait: bool):
        item = _device_itemsize(dtype)
        with self.dev.lock:
            raw = self.dev.queue.read_buffer(buf.gpu, 0, _padded(count * item))
        data = np.frombuffer(raw, np.uint8)[:count * item]
        if item == np.dtype(dtype).itemsize:
            return data.view(dtype).copy()
        narrow = data.view("<i4" if dtype == "int64" else "<u4").astype(dtype)
        if dtype == "int64":
            narrow[narrow == 2 ** 31 - 1] = 2 ** 63 - 1      # `first`'s "no index"
        return narrow

    def finish(self) -> None:
        with self.dev.lock:
            self.dev.queue.on_submitted_work_done_sync()

    # ---- kernels ----------------------------------------------------------------------------
    def kernel(self, spec: L.KernelSpec):
        wgpu, device = self.wgpu, self.dev.device
        stage = wgpu.ShaderStage.COMPUTE
        entries, seen = [], set()
        for a in spec.args:
            if a.is_buffer and a.name not in seen:
                seen.add(a.name)
                binding, _, writable = self.buffers[a.name]
                entries.append({"binding": binding, "visibility": stage,
                                "buffer": {"type": "storage" if writable else "read-only-storage"}})
        most = int(self.dev.limits.get("max-storage-buffers-per-shader-stage", len(entries) + 1))
        if len(entries) + 1 > most:     # wgpu's own error names neither the pass nor a way out
            return _Refused(spec, (
                f"webgpu: kernel {spec.name} binds {len(entries) + 1} storage buffers (its scalars' "
                f"one included); this adapter allows "
                f"{most} per shader stage (a shaped element that is not C-contiguous binds one buffer "
                f"per component, so elements of many values exceed it); pass C-contiguous arrays "
                f"(np.ascontiguousarray) or use the cpu / opencl / cuda backend"))
        entries.append({"binding": self.uniforms[spec.name], "visibility": stage,
                        "buffer": {"type": "read-only-storage"}})
        layout = device.create_bind_group_layout(entries=entries)
        pipeline = device.create_compute_pipeline(
            layout=device.create_pipeline_layout(bind_group_layouts=[layout]),
            compute={"module": self.module, "entry_point": spec.name})
        members = {pos: _MEMBER_NP[scalar_member_type(self.printer, a)]
                   for pos, a in enumerate(spec.args) if a.kind in SCALAR_KINDS}
        usage = wgpu.BufferUsage
        uniform = device.create_buffer(size=max(16, math.ceil(4 * (len(members) + 1) / 16) * 16),
                                       usage=usage.STORAGE | usage.COPY_DST)
        return _Kernel(spec, pipeline, layout, uniform, members)

    def set_args(self, kernel, args) -> None:
        if isinstance(kernel, _Refused):        # (the launch loop binds a kernel before launching it)
            raise QueryError(kernel.why)
        for pos, value in enumerate(args):
            self.set_arg(kernel, pos, value)

    def set_arg(self, kernel, pos: int, value) -> None:
        a = kernel.spec.args[pos]
        if a.is_buffer:
            binding = self.buffers[a.name][0]
            if kernel.buffers.get(binding) is not value:
                kernel.buffers[binding] = value
                kernel.bind_group = None
        else:
            kernel.scalars[pos] = value

    def _uniform_bytes(self, kernel, grid: int) -> bytes:
        parts = []
        for pos, np_type in kernel.members.items():
            v = kernel.scalars[pos]
            if np_type == "<i4" and not -2 ** 31 <= int(v) < 2 ** 31:
                raise QueryError(f"webgpu: argument {kernel.spec.args[pos].name} = {int(v)} does not fit "
                                 "in 32 bits (WGSL has no 64-bit types)")
            parts.append(np.array(v).astype(np_type).tobytes())
        parts.append(np.int32(grid).tobytes())
        return b"".join(parts)

    def launch(self, kernel, grid: int, block: int):
        dev = self.dev
        x = min(grid, self.max_dim)
        y = math.ceil(grid / x)
        if y > self.max_dim:
            raise QueryError(f"webgpu: {grid} workgroups exceed a 2-D dispatch of {self.max_dim}^2")
        data = self._uniform_bytes(kernel, grid)
        if kernel.bind_group is None:
            entries = [{"binding": b, "resource": {"buffer": buf.gpu, "offset": 0, "size": buf.gpu.size}}
                       for b, buf in kernel.buffers.items()]
            entries.append({"binding": self.uniforms[kernel.spec.name],
                            "resource": {"buffer": kernel.uniform, "offset": 0, "size": kernel.uniform.size}})
            kernel.bind_group = dev.device.create_bind_group(layout=kernel.layout, entries=entries)
        with dev.lock:
            if data != kernel.written:
                dev.queue.write_buffer(kernel.uniform, 0, data + bytes(kernel.uniform.size - len(data)))
                kernel.written = data
            return webgpu_timing.submit(dev, lambda writes: self._record(kernel, x, y, writes))

    def _record(self, kernel, x: int, y: int, timestamp_writes):
        """A command encoder holding one compute pass: the kernel's x * y dispatch."""
        encoder = self.dev.device.create_command_encoder()
        cpass = (encoder.begin_compute_pass(timestamp_writes=timestamp_writes) if timestamp_writes
                 else encoder.begin_compute_pass())
        cpass.set_pipeline(kernel.pipeline)
        cpass.set_bind_group(0, kernel.bind_group)
        cpass.dispatch_workgroups(x, y, 1)
        cpass.end()
        return encoder

    def elapsed_ms(self, token) -> float:
        return webgpu_timing.elapsed_ms(token)


class WebGPUPrepared(GpuPrepared):
    dialect = "webgpu"

    def __init__(self, dev: WebGPUDevice, ks: L.KernelSet, module, origin: str, compile_ms: float, aggs=()):
        super().__init__(ks, origin, compile_ms)
        self.dev, self.aggs = dev, tuple(aggs)
        self._loop = LaunchLoop(ks, WebGPURuntime(dev, module, ks))

    def loop(self) -> LaunchLoop:
        return self._loop

    def run_quick(self, inputs, params, n: int) -> tuple:
        if n > MAX_N:
            raise QueryError(f"webgpu: {n} elements exceed what i32 indexes reach ({MAX_N}); "
                             "use the cpu / opencl / cuda backend")
        loop = self._loop
        limit = webgpu_windows.binding_limit(self.dev)
        length = n if n * 8 * MAX_GATHER_STEP <= limit else \
            webgpu_windows.window_length(self.ks, inputs, n, limit, _device_itemsize, MAX_GATHER_STEP)
        if length >= n:                 # one binding holds every buffer (the common case)
            return super().run_quick(inputs, params, n)
        with self._lock:                # more than one storage binding: windows of `length`
            first = not self._runs
            self._runs += 1
            raw, launches, tokens = webgpu_windows.run(self, loop, self.aggs, [np.asarray(x) for x in inputs],
                                                       params, n, length)
        return raw, (loop, launches, tokens, self.origin if first else "memory", self.compile_ms if first else 0.0)


class WebGPUBackend(DeviceBackend):
    name = "webgpu"
    dialect = "webgpu"
    # WGSL has no 64-bit types: its passes store no 64-bit column, so a group_by's int64 /
    # float64 sums and means of narrow values get the values in their own type (group_narrow.py;
    # Backend.narrow_group_sums) and the group stage widens them
    caps = BackendCaps(device="gpu", wide_columns=False)

    def open_device(self) -> WebGPUDevice:
        return open_device()

    def find_gpu(self) -> bool:
        return find_gpu_adapter()

    @property
    def is_gpu(self) -> bool:
        """A real GPU adapter: `auto` never picks lavapipe / llvmpipe (CPU emulation)."""
        dev = self._device()
        return bool(dev and not dev.is_cpu)

    def prepare(self, p: Pass) -> Prepared:
        ks = self.kernel_set(p)             # type errors (64-bit values) first: they hold anywhere
        dev = self.require_device()
        t0 = time.perf_counter()
        module, origin = cached_module(dev, ks.source, [k.name for k in ks.kernels],
                                       [s.dtype for s in p.program.inputs])
        prepared = WebGPUPrepared(dev, ks, module, origin, 0.0, getattr(p.terminal, "aggs", ()))
        prepared.compile_ms = (time.perf_counter() - t0) * 1e3
        return prepared
