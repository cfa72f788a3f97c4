"""The `cuda` backend: generated CUDA C, compiled with NVRTC, launched with CuPy.

Kernels, buffers and launch shapes come from querycompute._codegen.gpu.render / codegen.launch.plan (the
planner the OpenCL backend and the CPU test harness share): this file compiles, moves data
and binds arguments. numpy inputs are copied to the device and results copied back; cupy
inputs stay on the device and ToArray returns cupy arrays.

Compiling needs no device (the arch is explicit, see cuda_compile.targets), so `prepare`
works anywhere NVRTC is installed; running without a device raises BackendUnavailableError.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Sequence

import numpy as np

from querycompute._codegen import launch as L
from querycompute._codegen.program import Pass

from ..errors import BackendUnavailableError
from .generated import GeneratedSourceBackend
from .base import KernelRun, Prepared, Trace
from .cuda_compile import compile_cuda, nvrtc_version, options_for, targets
from .cuda_device import CudaDevice, probe

MAX_GATHER_STEP = 8     # larger host strides: copying contiguously moves less than the span


def _is_cupy(x) -> bool:
    return type(x).__module__.startswith("cupy")


def _device_input(cp, x) -> tuple[Any, int]:
    """(device array whose pointer is element 0, element stride) for one 1-D input."""
    if _is_cupy(x):
        step, rem = divmod(x.strides[0], x.itemsize) if len(x) > 1 else (1, 0)
        return (x, step) if rem == 0 else (cp.ascontiguousarray(x), 1)
    x = np.asarray(x)
    if x.flags.c_contiguous or len(x) <= 1:
        return cp.asarray(np.ascontiguousarray(x)), 1
    step, rem = divmod(x.strides[0], x.itemsize)
    if rem == 0 and 0 < step <= MAX_GATHER_STEP:
        span = np.lib.stride_tricks.as_strided(x, shape=((len(x) - 1) * step + 1,), strides=(x.itemsize,))
        return cp.asarray(span), step
    return cp.asarray(np.ascontiguousarray(x)), 1


class CudaPrepared(Prepared):
    """Binaries for every target (CUBIN and PTX); loaded on the device at the first run."""

    def __init__(self, backend: "CudaBackend", ks: L.KernelSet, binaries: dict[str, bytes],
                 origin: str, compile_ms: float):
        self.backend, self.ks, self.binaries = backend, ks, binaries
        self.origin, self.compile_ms = origin, compile_ms
        self._functions: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._runs = 0

    def _load(self, cp, device: CudaDevice) -> dict[str, Any]:
        if self._functions is None:
            cubin = self.binaries.get(f"sm_{device.arch}")
            ptx = next((b for t, b in self.binaries.items() if t.startswith("compute_")), None)
            image = cubin if cubin is not None else ptx
            if image is None:
                raise BackendUnavailableError(
                    f"the kernels were compiled for {', '.join(self.binaries)} only, which "
                    f"{device.description} cannot load; unset QUERYCOMPUTE_CUDA_ARCH or set it "
                    f"to sm_{device.arch}")
            module = cp.cuda.function.Module()
            module.load(image)
            self._module = module                    # keeps the functions' module alive
            self._functions = {k.name: module.get_function(k.name) for k in self.ks.kernels}
        return self._functions

    def run(self, inputs: Sequence[Any], params: Sequence[Any], n: int, trace: Trace) -> Any:
        device = self.backend.device()
        import cupy as cp
        with self._lock:
            return self._run(cp, self._load(cp, device), inputs, params, n, trace)

    def _run(self, cp, functions, inputs, params, n, trace):
        ks = self.ks
        on_device = any(_is_cupy(x) for x in inputs)
        views = [_device_input(cp, x) for x in inputs]
        launches = L.plan(ks, n, all(step == 1 for _, step in views))
        cache = "memory" if self._runs else self.origin
        compile_ms = 0.0 if self._runs else self.compile_ms
        self._runs += 1
        xp = cp if on_device else np
        if not launches:                             # n == 0 for a ToArray pass
            return tuple(xp.empty(0, b.dtype) for b in ks.outputs)
        outs = [cp.empty(size, b.dtype) for b, size in zip(ks.outputs, L.output_sizes(ks, n))]
        sizes = L.scratch_sizes(ks, n)
        scratch = {b.name: cp.empty(sizes[b.name], b.dtype) for b in ks.scratch}
        timed = []
        for launch in launches:
            args = L.bind(launch, [v[0] for v in views], [v[1] for v in views], params, n, outs, scratch)
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            functions[launch.name]((launch.grid,), (launch.block,), tuple(args))
            end.record()
            timed.append((launch, start, end))
        end.synchronize()
        for launch, start, end in timed:
            trace.kernels.append(KernelRun(launch.name, "cuda", (launch.grid,), (launch.block,),
                                           cache, compile_ms, cp.cuda.get_elapsed_time(start, end)))
            compile_ms = 0.0                         # the module's compile time is reported once
        if ks.shape == "reduce":
            return L.decode_reduce(ks, [o[:1].get()[0] for o in outs])
        count = int(scratch["total"][:1].get()[0]) if ks.shape == "compact" else n
        return tuple(o[:count] if on_device else o[:count].get() for o in outs)


class CudaBackend(GeneratedSourceBackend):
    name = "cuda"
    dialect = "cuda"

    def __init__(self):
        self._probed = False
        self._device: CudaDevice | None = None
        self._why = ""
        super().__init__()

    def _probe(self) -> None:
        if not self._probed:
            self._device, self._why = probe()
            self._probed = True

    def device(self) -> CudaDevice:
        """The device kernels run on, or BackendUnavailableError saying why there is none."""
        self._probe()
        if self._device is None:
            raise BackendUnavailableError(f"backend 'cuda' can't run here: {self._why}")
        return self._device

    @property
    def is_gpu(self) -> bool:
        self._probe()
        return self._device is not None

    def availability(self) -> tuple[bool, str]:
        self._probe()
        return (True, self._device.description) if self._device else (False, self._why)

    def prepare(self, p: Pass) -> Prepared:
        """Compile for every target (from the disk cache when it has them). Works without a
        device; the returned Prepared raises BackendUnavailableError when run without one."""
        from ..cache import disk_cache, dump_source, make_key
        self._probe()
        ks = self.kernel_set(p)
        compiler = "nvrtc {}.{}".format(*nvrtc_version())
        binaries, origin, compile_ms = {}, "disk", 0.0
        for arch in targets(self._device.arch if self._device else None):
            key = make_key(backend=self.name, compiler=compiler, device=arch,
                           options=options_for(arch, ks.options), source=ks.source)
            payload = disk_cache.load(key)
            if payload is None:
                dump_source(p.name, self.dialect, ks.source)
                t0 = time.perf_counter()
                payload = compile_cuda(ks.source, ks.options, arch)
                ms = (time.perf_counter() - t0) * 1e3
                disk_cache.store(key, payload, source_suffix=".cu",
                                 kernel_names=[k.name for k in ks.kernels], compile_ms=ms,
                                 dtypes=[s.dtype for s in p.program.inputs], extra={"arch": arch})
                origin, compile_ms = "compiled", compile_ms + ms
            binaries[arch] = payload
        return CudaPrepared(self, ks, binaries, origin, compile_ms)
