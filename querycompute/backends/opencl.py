"""The `opencl` backend: runs generated OpenCL C through PyOpenCL (pocl's CPU device here).

Kernels, buffers and launches come from querycompute._codegen.gpu.render / codegen.launch.plan: this file
only moves data and binds arguments. Programs come from the disk kernel cache when an earlier
process built them for this device (opencl_device.cached_program).

Inputs: on a CPU device (pocl) kernels read the caller's arrays in place (zero-copy, see
DeviceContext.zero_copy); other devices get them copied into device buffers reused across
calls. Strided inputs are handed over as the memory span they cover and gathered on the
device (the strided kernel variant): any positive stride when zero-copy, at most
MAX_GATHER_STEP elements when copying; other strides are made contiguous on the host first.
Warm calls with the same n reuse the launch plan, the buffers and the bound arguments.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Sequence

import numpy as np

from querycompute._codegen import launch as L
from querycompute._codegen.program import Pass

from ..errors import QueryError
from .generated import GeneratedSourceBackend
from .base import KernelRun, Prepared
from .opencl_device import DeviceContext, cached_program, open_device

MAX_GATHER_STEP = 8     # copying to a device: larger strides copy less on the host than the span


def _device_view(x: np.ndarray, max_step: float) -> tuple[np.ndarray, int]:
    """(array holding the elements the kernel reads, element stride to pass) for a 1-D input:
    the input itself when contiguous, the memory span a positive stride of at most
    `max_step` elements covers (gathered on the device), else a contiguous host copy."""
    item = x.dtype.itemsize
    if x.flags.c_contiguous or len(x) <= 1:
        return np.ascontiguousarray(x), 1
    step, rem = divmod(x.strides[0], item)
    if rem == 0 and 0 < step <= max_step:
        span = np.lib.stride_tricks.as_strided(x, shape=((len(x) - 1) * step + 1,), strides=(item,))
        return span, step
    return np.ascontiguousarray(x), 1


def _bits_key(values) -> tuple:
    """Scalars by type and bits, so 0.0 and -0.0 (or two NaN payloads) never look equal."""
    return tuple((type(v), np.asarray(v).tobytes()) for v in values)


class _CallShape:
    """Launches and device buffers for one (n, contiguity): warm calls with the same n reuse
    them, and the kernels keep the arguments bound by the last such call."""
    __slots__ = ("launches", "out_sizes", "out_bufs", "scratch")

    def __init__(self, launches, out_sizes, out_bufs, scratch):
        self.launches, self.out_sizes, self.out_bufs, self.scratch = launches, out_sizes, out_bufs, scratch


class OpenCLPrepared(Prepared):
    def __init__(self, dev: DeviceContext, ks: L.KernelSet, program, origin: str,
                 compile_ms: float):
        self.dev, self.ks, self.origin, self.compile_ms = dev, ks, origin, compile_ms
        self.kernels = {k.name: dev.cl.Kernel(program, k.name) for k in ks.kernels}
        # (argument position, input number) of each kernel's input buffers: zero-copy inputs
        # are new buffers every call, so these are rebound every call.
        self._input_pos = {k.name: [(j, a.index) for j, a in enumerate(k.args) if a.kind == "input"]
                           for k in ks.kernels}
        self._bound: dict[str, tuple] = {}               # kernel -> (call shape, strides, params) last bound
        self._buffers: dict[str, tuple[int, Any]] = {}   # role -> (bytes, cl.Buffer), reused per size
        self._shape: tuple[tuple, _CallShape] | None = None
        self._max_step = float("inf") if dev.zero_copy else MAX_GATHER_STEP
        self._lock = threading.Lock()                    # buffers are shared: one run at a time
        self._runs = 0

    def _buffer(self, role: str, nbytes: int):
        nbytes = max(nbytes, 1)                          # OpenCL has no empty buffers
        have = self._buffers.get(role)
        if have is None or have[0] != nbytes:
            have = (nbytes, self.dev.cl.Buffer(self.dev.context, self.dev.cl.mem_flags.READ_WRITE, nbytes))
            self._buffers[role] = have
        return have[1]

    def _input_buffer(self, k: int, host: np.ndarray):
        """Device buffer holding input k. Zero-copy devices read the host memory in place
        (an element-aligned copy first when the view is not aligned to its element size);
        others get it copied into a buffer reused across calls."""
        cl = self.dev.cl
        if not host.nbytes:
            return self._buffer(f"in{k}", 0)
        if self.dev.zero_copy:
            if not host.flags.aligned:
                host = host.copy()
            return cl.Buffer(self.dev.context, cl.mem_flags.READ_ONLY | cl.mem_flags.USE_HOST_PTR, hostbuf=host)
        buf = self._buffer(f"in{k}", host.nbytes)
        cl.enqueue_copy(self.dev.queue, buf, host, is_blocking=False)
        return buf

    def _call_shape(self, n: int, contiguous: bool) -> _CallShape:
        key = (n, contiguous)
        if self._shape is None or self._shape[0] != key:
            ks = self.ks
            out_sizes = L.output_sizes(ks, n)
            out_bufs = [self._buffer(f"out{k}", size * np.dtype(b.dtype).itemsize)
                        for k, (b, size) in enumerate(zip(ks.outputs, out_sizes))]
            sizes = L.scratch_sizes(ks, n)
            scratch = {b.name: self._buffer(b.name, sizes[b.name] * np.dtype(b.dtype).itemsize) for b in ks.scratch}
            self._shape = (key, _CallShape(L.plan(ks, n, contiguous), out_sizes, out_bufs, scratch))
        return self._shape[1]

    def _bind(self, launch: L.Launch, shape: _CallShape, in_bufs, strides, params, n: int, key: tuple):
        """The launch's kernel with its arguments bound. set_args costs as much as a small
        kernel on pocl, so when the kernel was last bound with the same `key` (call shape,
        strides, parameter bits) only the input buffers are rebound."""
        kernel = self.kernels[launch.name]
        if self._bound.get(launch.name) != key:
            kernel.set_args(*L.bind(launch, in_bufs, strides, params, n, shape.out_bufs, shape.scratch))
            self._bound[launch.name] = key
        else:
            for pos, k in self._input_pos[launch.name]:
                kernel.set_arg(pos, in_bufs[k])
        return kernel

    def run_quick(self, inputs: Sequence[Any], params: Sequence[Any], n: int) -> tuple:
        """(raw results, row): the kernels' profiling times are read (5-10 us a call on
        pocl) only when trace_rows(row) is asked for them."""
        with self._lock:
            return self._run(inputs, params, n)

    def trace_rows(self, row: tuple) -> list[KernelRun]:
        launches, events, cache, compile_ms = row
        info = self.dev.cl.profiling_info
        rows = []
        for launch, ev in zip(launches, events):
            run_ms = (ev.get_profiling_info(info.END) - ev.get_profiling_info(info.START)) * 1e-6
            rows.append(KernelRun(launch.name, "opencl", (launch.grid,), (launch.block,), cache,
                                  compile_ms, run_ms))
            compile_ms = 0.0                 # the program's build time is reported once
        return rows

    def _run(self, inputs, params, n):
        """-> (raw results, (launches, their events, cache origin, compile ms))."""
        cl, queue = self.dev.cl, self.dev.queue
        views = [_device_view(np.asarray(x), self._max_step) for x in inputs]
        strides = tuple(step for _, step in views)
        shape = self._call_shape(n, all(step == 1 for step in strides))
        cache = "memory" if self._runs else self.origin
        compile_ms = 0.0 if self._runs else self.compile_ms
        self._runs += 1
        if not shape.launches:               # n == 0 for a ToArray pass: nothing to launch
            return tuple(np.empty(0, b.dtype) for b in self.ks.outputs), ((), (), cache, compile_ms)
        in_bufs = [self._input_buffer(k, host) for k, (host, _) in enumerate(views)]
        key = (shape, strides, _bits_key(params))
        events = []
        for launch in shape.launches:
            kernel = self._bind(launch, shape, in_bufs, strides, params, n, key)
            events.append(cl.enqueue_nd_range_kernel(queue, kernel, (launch.grid * launch.block,), (launch.block,)))
        return self._read(shape), (shape.launches, events, cache, compile_ms)

    def _read(self, shape: _CallShape):
        """Copy the results back; the last copy blocks, so every kernel (and every read of a
        zero-copy input) has finished when this returns."""
        ks, cl, queue = self.ks, self.dev.cl, self.dev.queue
        if ks.shape == "reduce":
            slots = [np.empty(1, b.dtype) for b in ks.outputs]
            for k, (host, buf) in enumerate(zip(slots, shape.out_bufs)):
                cl.enqueue_copy(queue, host, buf, is_blocking=k == len(slots) - 1)
            return L.decode_reduce(ks, [host[0] for host in slots])
        count = shape.out_sizes[0] if shape.out_sizes else 0
        if ks.shape == "compact":
            total = np.empty(1, np.int64)
            cl.enqueue_copy(queue, total, shape.scratch["total"])
            count = int(total[0])
        outs = []
        for b, buf in zip(ks.outputs, shape.out_bufs):
            host = np.empty(count, b.dtype)
            if count:
                cl.enqueue_copy(queue, host, buf)
            outs.append(host)
        return tuple(outs)


class OpenCLBackend(GeneratedSourceBackend):
    name = "opencl"
    dialect = "opencl"

    def __init__(self):
        self._dev: DeviceContext | None = None
        self._why = ""
        super().__init__()

    def _device(self) -> DeviceContext | None:
        if self._dev is None and not self._why:
            try:
                self._dev = open_device()
            except RuntimeError as exc:
                self._why = str(exc)
        return self._dev

    @property
    def is_gpu(self) -> bool:
        dev = self._device()
        return bool(dev and dev.is_gpu)

    def availability(self) -> tuple[bool, str]:
        dev = self._device()
        return (True, dev.description) if dev else (False, self._why)

    def prepare(self, p: Pass) -> Prepared:
        dev = self._device()
        if dev is None:
            raise QueryError(f"opencl backend unavailable: {self._why}")
        ks = self.kernel_set(p)
        if "cl_khr_fp64" in ks.source and not dev.has_fp64:
            raise QueryError(f"float64 is not supported by the OpenCL device {dev.description} "
                             "(no cl_khr_fp64); use float32 or another backend")
        t0 = time.perf_counter()
        program, origin = cached_program(dev, ks.source, ks.options,
                                         [k.name for k in ks.kernels],
                                         [s.dtype for s in p.program.inputs])
        return OpenCLPrepared(dev, ks, program, origin, (time.perf_counter() - t0) * 1e3)
