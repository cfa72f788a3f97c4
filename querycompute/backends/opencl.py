"""The `opencl` backend: runs generated OpenCL C through PyOpenCL (pocl's CPU device here).

Kernels, buffers and launches come from codegen.gpu.render / codegen.launch.plan: this file
only moves data and binds arguments. Programs come from the disk kernel cache when an earlier
process built them for this device (opencl_device.cached_program). Strided inputs: a
positive stride of at most MAX_GATHER_STEP elements is uploaded as the memory span it covers
and gathered on the device (the strided kernel variant); any other stride is made contiguous
on the host first.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Sequence

import numpy as np

from codegen import launch as L
from codegen.program import Pass

from ..errors import QueryError
from .generated import GeneratedSourceBackend
from .base import KernelRun, Prepared, Trace
from .opencl_device import DeviceContext, cached_program, open_device

MAX_GATHER_STEP = 8     # larger strides: copying on the host moves less data than the span


def _device_view(x: np.ndarray) -> tuple[np.ndarray, int]:
    """(contiguous array to upload, element stride to pass) for a 1-D input."""
    item = x.dtype.itemsize
    if x.flags.c_contiguous or len(x) <= 1:
        return np.ascontiguousarray(x), 1
    step, rem = divmod(x.strides[0], item)
    if rem == 0 and 0 < step <= MAX_GATHER_STEP:
        span = np.lib.stride_tricks.as_strided(x, shape=((len(x) - 1) * step + 1,), strides=(item,))
        return span, step
    return np.ascontiguousarray(x), 1


class OpenCLPrepared(Prepared):
    def __init__(self, dev: DeviceContext, ks: L.KernelSet, program, origin: str,
                 compile_ms: float):
        self.dev, self.ks, self.origin, self.compile_ms = dev, ks, origin, compile_ms
        self.kernels = {k.name: dev.cl.Kernel(program, k.name) for k in ks.kernels}
        self._buffers: dict[str, tuple[int, Any]] = {}   # role -> (bytes, cl.Buffer), reused per size
        self._lock = threading.Lock()                    # buffers are shared: one run at a time
        self._runs = 0

    def _buffer(self, role: str, nbytes: int):
        nbytes = max(nbytes, 1)                          # OpenCL has no empty buffers
        have = self._buffers.get(role)
        if have is None or have[0] != nbytes:
            have = (nbytes, self.dev.cl.Buffer(self.dev.context, self.dev.cl.mem_flags.READ_WRITE, nbytes))
            self._buffers[role] = have
        return have[1]

    def run(self, inputs: Sequence[Any], params: Sequence[Any], n: int, trace: Trace) -> Any:
        with self._lock:
            return self._run(inputs, params, n, trace)

    def _run(self, inputs, params, n, trace):
        ks, cl, queue = self.ks, self.dev.cl, self.dev.queue
        views = [_device_view(np.asarray(x)) for x in inputs]
        contiguous = all(step == 1 for _, step in views)
        launches = L.plan(ks, n, contiguous)
        cache = "memory" if self._runs else self.origin
        compile_ms = 0.0 if self._runs else self.compile_ms
        self._runs += 1
        if not launches:                     # n == 0 for a ToArray pass: nothing to launch
            return tuple(np.empty(0, b.dtype) for b in ks.outputs)
        in_bufs = []
        for k, (host, _) in enumerate(views):
            buf = self._buffer(f"in{k}", host.nbytes)
            if host.nbytes:
                cl.enqueue_copy(queue, buf, host, is_blocking=False)
            in_bufs.append(buf)
        out_sizes = L.output_sizes(ks, n)
        out_bufs = [self._buffer(f"out{k}", size * np.dtype(b.dtype).itemsize)
                    for k, (b, size) in enumerate(zip(ks.outputs, out_sizes))]
        sizes = L.scratch_sizes(ks, n)
        scratch = {b.name: self._buffer(b.name, sizes[b.name] * np.dtype(b.dtype).itemsize) for b in ks.scratch}
        events = []
        strides = [v[1] for v in views]
        for launch in launches:
            args = L.bind(launch, in_bufs, strides, params, n, out_bufs, scratch)
            kernel = self.kernels[launch.name]
            kernel.set_args(*args)
            events.append(cl.enqueue_nd_range_kernel(queue, kernel, (launch.grid * launch.block,), (launch.block,)))
        result = self._read(out_bufs, scratch, out_sizes)
        for launch, ev in zip(launches, events):
            trace.kernels.append(KernelRun(launch.name, "opencl", (launch.grid,), (launch.block,), cache,
                                           compile_ms, (ev.profile.end - ev.profile.start) * 1e-6))
            compile_ms = 0.0                 # the program's build time is reported once
        return result

    def _read(self, out_bufs, scratch, out_sizes):
        ks, cl, queue = self.ks, self.dev.cl, self.dev.queue
        if ks.shape == "reduce":
            slots = []
            for b, buf in zip(ks.outputs, out_bufs):
                host = np.empty(1, b.dtype)
                cl.enqueue_copy(queue, host, buf)
                slots.append(host[0])
            return L.decode_reduce(ks, slots)
        count = out_sizes[0] if out_sizes else 0
        if ks.shape == "compact":
            total = np.empty(1, np.int64)
            cl.enqueue_copy(queue, total, scratch["total"])
            count = int(total[0])
        outs = []
        for b, buf in zip(ks.outputs, out_bufs):
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
