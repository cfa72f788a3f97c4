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
from typing import Any, Callable, Sequence

import numpy as np

from querycompute._codegen import launch as L
from querycompute._codegen.program import Pass

from ..errors import BackendUnavailableError
from .generated import GeneratedSourceBackend
from .base import KernelRun, Prepared, Trace
from .cuda_compile import compile_cuda, nvrtc_version, options_for, targets
from .cuda_device import CudaDevice, current_index, describe, probe

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


def pick_image(binaries: dict[str, bytes], arch: int) -> tuple[str, bytes] | None:
    """(target, image) that a device of compute capability `arch` can load: its own CUBIN,
    else the PTX of the highest virtual arch not above it (the driver JITs PTX forward to
    newer GPUs, never back to older ones); None when there is neither."""
    cubin = binaries.get(f"sm_{arch}")
    if cubin is not None:
        return f"sm_{arch}", cubin
    ptx = [(int(t[len("compute_"):]), t) for t in binaries if t.startswith("compute_")]
    ptx = [nt for nt in ptx if nt[0] <= arch]
    return (max(ptx)[1], binaries[max(ptx)[1]]) if ptx else None


class DeviceModules:
    """Loaded kernels, one set per device. A CUDA module lives in the context of the device it
    was loaded on, and its functions launch only there: with several GPUs each device loads
    its own on first use (CuPy's current device at launch picks which)."""

    def __init__(self, load: Callable[[CudaDevice], dict[str, Any]]):
        self._load = load
        self._by_index: dict[int, dict[str, Any]] = {}

    def functions(self, device: CudaDevice) -> dict[str, Any]:
        hit = self._by_index.get(device.index)
        if hit is None:
            hit = self._by_index[device.index] = self._load(device)
        return hit

    @property
    def devices(self) -> tuple[int, ...]:
        return tuple(self._by_index)


class CudaPrepared(Prepared):
    """Binaries for every target (CUBIN and PTX); loaded on each device at its first run."""

    def __init__(self, backend: "CudaBackend", p: Pass, ks: L.KernelSet,
                 binaries: dict[str, bytes], origin: str, compile_ms: float):
        self.backend, self.p, self.ks, self.binaries = backend, p, ks, binaries
        self.origin, self.compile_ms = origin, compile_ms
        self.modules = DeviceModules(self._load)
        self._lock = threading.Lock()
        self._runs = 0

    def _load(self, device: CudaDevice) -> dict[str, Any]:
        import cupy as cp
        image = pick_image(self.binaries, device.arch)
        if image is None:         # another GPU than the one prepare compiled for: compile for it
            extra, _, _ = self.backend.compile_binaries(self.p, self.ks, targets(device.arch))
            self.binaries = {**self.binaries, **extra}
            image = pick_image(self.binaries, device.arch)
        if image is None:
            raise BackendUnavailableError(
                f"the kernels were compiled for {', '.join(self.binaries)} only, which "
                f"{device.description} cannot load; unset QUERYCOMPUTE_CUDA_ARCH or set it "
                f"to sm_{device.arch}")
        module = cp.cuda.function.Module()
        module.load(image[1])     # into the current device's context
        functions = {k.name: module.get_function(k.name) for k in self.ks.kernels}
        functions[None] = module  # keeps the functions' module alive
        return functions

    def run(self, inputs: Sequence[Any], params: Sequence[Any], n: int, trace: Trace) -> Any:
        self.backend.device()                        # BackendUnavailableError without one
        import cupy as cp
        device = self.backend.device(current_index())
        with self._lock:
            return self._run(cp, self.modules.functions(device), inputs, params, n, trace)

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
        self._others: dict[int, CudaDevice] = {}     # devices other than the probed one
        self._why = ""
        super().__init__()

    def _probe(self) -> None:
        if not self._probed:
            self._device, self._why = probe()
            self._probed = True

    def device(self, index: int | None = None) -> CudaDevice:
        """Device `index` (default: the one current when first probed), or
        BackendUnavailableError saying why there is none."""
        self._probe()
        if self._device is None:
            raise BackendUnavailableError(f"backend 'cuda' can't run here: {self._why}")
        if index is None or index == self._device.index:
            return self._device
        dev = self._others.get(index)
        if dev is None:
            dev = self._others[index] = describe(index)
        return dev

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
        self._probe()
        ks = self.kernel_set(p)
        archs = targets(self._device.arch if self._device else None)
        binaries, origin, compile_ms = self.compile_binaries(p, ks, archs)
        return CudaPrepared(self, p, ks, binaries, origin, compile_ms)

    def compile_binaries(self, p: Pass, ks: L.KernelSet, archs: Sequence[str]):
        """({arch: binary}, "disk" or "compiled", compile ms) through the disk cache."""
        from ..cache import disk_cache, dump_source, make_key
        compiler = "nvrtc {}.{}".format(*nvrtc_version())
        binaries, origin, compile_ms = {}, "disk", 0.0
        for arch in archs:
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
        return binaries, origin, compile_ms
