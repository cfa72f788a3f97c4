"""The `opencl` backend: runs generated OpenCL C through PyOpenCL (pocl's CPU device here).

The pass runs through the launch loop every GPU runtime shares (gpu_launch.LaunchLoop: plan,
buffers, argument binding, launches, results); this file is the OpenCL runtime under it.
Programs come from the disk kernel cache when an earlier process built them for this device
(opencl_device.cached_program).

Inputs: on a CPU device (pocl) kernels read the caller's arrays in place (zero-copy, see
DeviceContext.zero_copy); other devices get them copied into device buffers reused across
calls. Strided inputs are handed over as the memory span they cover and gathered on the
device (the strided kernel variant): any positive stride when zero-copy, at most
MAX_GATHER_STEP elements when copying; other strides are made contiguous on the host first.
Warm calls with the same n reuse the launch plan, the buffers and the bound arguments (the
loop rebinds only what changed: set_args costs as much as a small kernel on pocl), and the
kernels' profiling times are read only when qc.last_trace() asks for them.
"""
from __future__ import annotations

import time

import numpy as np

from querycompute._codegen import launch as L
from querycompute._codegen.ir.program import Pass

from ...errors import QueryError
from ..gpu.generated import DeviceBackend
from ..base import BackendCaps, Prepared
from ..gpu.device_columns import TRANSFERS, ClColumn
from ..gpu.gpu_launch import DeviceRuntime, GpuPrepared, LaunchLoop, strided_span
from .opencl_device import DeviceContext, cached_program, find_gpu, open_device

MAX_GATHER_STEP = 8     # copying to a device: larger strides copy less on the host than the span
WORK_GROUPS_PER_UNIT = 8    # a reduction's physical grid: work-groups per compute unit


# ClColumns stay on the device between a staged plan's stages; host inputs larger than the
# device memory budget stream through it in chunks
CAPS = BackendCaps(device="gpu", device_columns=True, streams=True)


class OpenCLRuntime(DeviceRuntime):
    """PyOpenCL under the shared launch loop: kernels are cl.Kernels (they keep their bound
    arguments), launches are enqueued on the device's in-order profiling queue and return
    their events."""

    def __init__(self, dev: DeviceContext, program):
        self.dev, self.cl, self.program = dev, dev.cl, program
        self.queue, self.context = dev.queue, dev.context
        self._max_step = float("inf") if dev.zero_copy else MAX_GATHER_STEP
        self._copy_queue = None        # streamed chunks' copies (gpu_staging.py), made when first used

    device_columns = CAPS.device_columns     # ClColumns between a staged plan's stages (device_columns.py)

    def view(self, x):
        if isinstance(x, ClColumn):
            return x, 1
        return strided_span(np.asarray(x), self._max_step)

    def in_place(self, x):
        """Zero-copy devices read the host memory (an element-aligned copy first when the view
        is not aligned to its element size); other devices get a copy. A ClColumn is read
        where it is. Host memory handed to the device counts in TRANSFERS["to_device"]."""
        if isinstance(x, ClColumn):
            return x.buf
        if not self.dev.zero_copy:
            return None
        TRANSFERS["to_device"] += 1
        if not x.flags.aligned:
            x = x.copy()
        cl = self.cl
        return cl.Buffer(self.context, cl.mem_flags.READ_ONLY | cl.mem_flags.USE_HOST_PTR, hostbuf=x)

    def resident_blocks(self, kernel, block: int) -> int:
        """OpenCL has no occupancy query: a few work-groups per compute unit (a CPU device runs
        one per core at a time; GPUs keep several per compute unit resident)."""
        return WORK_GROUPS_PER_UNIT * self.dev.device.max_compute_units

    def alloc(self, size: int, dtype: str):
        nbytes = max(size * np.dtype(dtype).itemsize, 1)          # OpenCL has no empty buffers
        return self.cl.Buffer(self.context, self.cl.mem_flags.READ_WRITE, nbytes)

    def upload(self, buf, host) -> None:
        TRANSFERS["to_device"] += 1
        self.cl.enqueue_copy(self.queue, buf, host, is_blocking=False)

    def stage(self, buf, host):
        """A non-blocking copy on a second command queue (so it runs beside the kernels on the
        device's queue) -> its event. PyOpenCL keeps `host` alive until the copy is done."""
        if self._copy_queue is None:
            self._copy_queue = self.cl.CommandQueue(self.context, self.dev.device)
        TRANSFERS["to_device"] += 1
        done = self.cl.enqueue_copy(self._copy_queue, buf, np.ascontiguousarray(host), is_blocking=False)
        self._copy_queue.flush()          # start it now, not at the next wait
        return done

    def await_staged(self, tokens) -> None:
        events = [t for t in tokens if t is not None]
        if events:                        # the in-order queue's later launches wait for them
            self.cl.enqueue_barrier(self.queue, wait_for=events)

    def slot_align(self) -> int:
        return max(8, self.dev.device.mem_base_addr_align // 8)    # a sub-buffer's origin (bits)

    def slot_view(self, buf, offset: int, dtype: str):
        return buf.get_sub_region(offset, np.dtype(dtype).itemsize)

    def kernel(self, spec: L.KernelSpec):
        return self.cl.Kernel(self.program, spec.name)

    def set_args(self, kernel, args) -> None:
        kernel.set_args(*args)

    def set_arg(self, kernel, pos: int, value) -> None:
        kernel.set_arg(pos, value)

    def launch(self, kernel, grid: int, block: int):
        return self.cl.enqueue_nd_range_kernel(self.queue, kernel, (grid * block,), (block,))

    def read(self, buf, count: int, dtype: str, wait: bool):
        host = np.empty(count, dtype)
        TRANSFERS["to_host"] += 1
        TRANSFERS["to_host_bytes"] += host.nbytes
        self.cl.enqueue_copy(self.queue, host, buf, is_blocking=wait)
        return host

    def hand_over(self, buf, count: int, dtype: str = ""):
        return ClColumn(self.cl, self.queue, buf, count, dtype)

    def finish(self) -> None:
        self.queue.finish()

    def elapsed_ms(self, event) -> float:
        """Kernel profiling time, read (5-10 us a launch on pocl) only for a trace row."""
        info = self.cl.profiling_info
        event.wait()              # results left on the device: nothing waited for it yet
        return (event.get_profiling_info(info.END) - event.get_profiling_info(info.START)) * 1e-6


class OpenCLPrepared(GpuPrepared):
    dialect = "opencl"

    def __init__(self, dev: DeviceContext, ks: L.KernelSet, program, origin: str,
                 compile_ms: float):
        super().__init__(ks, origin, compile_ms)
        self.dev, self.program = dev, program
        self._loop = LaunchLoop(ks, OpenCLRuntime(dev, program))

    def loop(self) -> LaunchLoop:
        return self._loop


class OpenCLBackend(DeviceBackend):
    name = "opencl"
    dialect = "opencl"
    caps = CAPS

    def open_device(self) -> DeviceContext:
        return open_device()

    def find_gpu(self) -> bool:
        return find_gpu()

    @property
    def is_gpu(self) -> bool:
        dev = self._device()
        return bool(dev and dev.is_gpu)

    def prepare(self, p: Pass) -> Prepared:
        dev = self.require_device()
        ks = self.kernel_set(p)
        if "cl_khr_fp64" in ks.source and not dev.has_fp64:
            raise QueryError(f"float64 is not supported by the OpenCL device {dev.description} "
                             "(no cl_khr_fp64); use float32 or another backend")
        t0 = time.perf_counter()
        program, origin = cached_program(dev, ks.source, ks.options,
                                         [k.name for k in ks.kernels],
                                         [s.dtype for s in p.program.inputs])
        return OpenCLPrepared(dev, ks, program, origin, (time.perf_counter() - t0) * 1e3)
