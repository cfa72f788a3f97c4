"""The `cuda` backend: generated CUDA C, compiled with NVRTC, launched with CuPy.

The pass runs through the launch loop every GPU runtime shares (gpu_launch.LaunchLoop: plan,
buffers, argument binding, launches, results; the CPU test harness runs CUDA kernel sets
through it too); this file is the CuPy runtime under it. numpy inputs are copied to the
device and results copied back; cupy inputs stay on the device and ToArray returns cupy
arrays. Binaries come from the disk kernel cache when an earlier process compiled them
(cuda_compile.cached_binaries).

Compiling needs no device (the arch is explicit, see cuda_compile.targets), so `prepare`
works anywhere NVRTC is installed; running without a device raises BackendUnavailableError.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from querycompute._codegen import launch as L
from querycompute._codegen.ir.program import Pass

from ...errors import BackendUnavailableError
from ..gpu.generated import GeneratedSourceBackend
from ..base import BackendCaps, Prepared
from .cuda_compile import cached_binaries, targets
from ..gpu.gpu_launch import DeviceRuntime, GpuPrepared, LaunchLoop, strided_span
from .cuda_device import CudaDevice, current_index, describe, probe

MAX_GATHER_STEP = 8     # larger host strides: copying contiguously moves less than the span
PINNED_READ_BYTES = 4096   # results up to this size (a reduction's slots) come back through pinned memory


def _is_cupy(x) -> bool:
    return type(x).__module__.startswith("cupy")


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


class _Kernel:
    """A CUDA function and the argument tuple bound to it (CUDA takes the arguments at each
    launch): made once by `set_args`, remade only when `set_arg` changes an argument, so a hot
    call hands every launch the tuple it already has."""
    __slots__ = ("function", "args")

    def __init__(self, function):
        self.function, self.args = function, ()


# CuPy arrays stay on the device between a staged plan's stages; host inputs larger than the
# device memory budget stream through it in chunks
CAPS = BackendCaps(device="gpu", device_columns=True, streams=True)


class CudaRuntime(DeviceRuntime):
    """CuPy under the shared launch loop, on one device: numpy inputs are copied into device
    buffers reused per size; cupy inputs are read in place, and then ToArray results stay on
    the device (handed over as cupy arrays). Launches go to CuPy's current stream, each with
    the argument tuple prepared when its arguments were bound; a reduction's results come back
    through pinned memory with one synchronize (`read`). A timed launch
    (QUERYCOMPUTE_KERNEL_TIMES=1) sits between two events, read only for a trace row.
    Streamed chunks (gpu_staging.py) are staged through pinned host buffers on a second
    stream, which the compute stream waits on by event."""

    def __init__(self, cp, functions: dict[str, Any]):
        self.cp, self.functions = cp, functions
        self._copy_stream = None
        self._pinned: dict[int, tuple] = {}        # id(device buffer) -> (buffer, pinned host array)
        self._readback = None                      # PINNED_READ_BYTES of pinned memory (`read`)

    def view(self, x):
        if _is_cupy(x):
            step, rem = divmod(x.strides[0], x.itemsize) if len(x) > 1 else (1, 0)
            return (x, step) if rem == 0 else (self.cp.ascontiguousarray(x), 1)
        return strided_span(np.asarray(x), MAX_GATHER_STEP)

    def in_place(self, x):
        return x if _is_cupy(x) else None

    def vector_aligned(self, buf) -> bool:
        return buf.data.ptr % 16 == 0          # uint4 loads (a CuPy view like x[1:] is not)

    def resident_blocks(self, kernel: _Kernel, block: int) -> int:
        """The CUDA occupancy API's blocks per SM (registers, shared memory) x SM count."""
        from cupy_backends.cuda.api import driver
        per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.function.ptr, block, 0)
        return max(1, per_sm) * self.cp.cuda.Device().attributes["MultiProcessorCount"]

    def alloc(self, size: int, dtype: str):
        return self.cp.empty(size, dtype)

    def upload(self, buf, host) -> None:
        buf.set(host)

    def slot_align(self) -> int:
        return 16

    def slot_view(self, buf, offset: int, dtype: str):
        return buf[offset:offset + np.dtype(dtype).itemsize].view(dtype)

    def kernel(self, spec: L.KernelSpec) -> _Kernel:
        return _Kernel(self.functions[spec.name])

    def set_args(self, kernel: _Kernel, args) -> None:
        kernel.args = tuple(args)

    def set_arg(self, kernel: _Kernel, pos: int, value) -> None:
        if kernel.args[pos] is not value:          # a hot call's input: usually the same buffer
            args = list(kernel.args)
            args[pos] = value
            kernel.args = tuple(args)

    def launch(self, kernel: _Kernel, grid: int, block: int):
        kernel.function((grid,), (block,), kernel.args)

    def timed_launch(self, kernel: _Kernel, grid: int, block: int):
        start, end = self.cp.cuda.Event(), self.cp.cuda.Event()
        start.record()
        kernel.function((grid,), (block,), kernel.args)
        end.record()
        return start, end

    def stage(self, buf, host):
        """host -> this buffer's pinned staging array (a host copy, running while the device
        computes), then an asynchronous copy to `buf` on the copy stream; -> its event. The
        pinned array is reused: its last copy finished before the chunk that read `buf`."""
        cp = self.cp
        have = self._pinned.get(id(buf))
        if have is None or have[0] is not buf or have[1].nbytes != host.nbytes or have[1].dtype != host.dtype:
            memory = cp.cuda.alloc_pinned_memory(max(host.nbytes, 1))
            have = self._pinned[id(buf)] = (buf, np.frombuffer(memory, host.dtype, len(host)))
        pinned = have[1]
        np.copyto(pinned, host)
        if self._copy_stream is None:
            self._copy_stream = cp.cuda.Stream(non_blocking=True)
        buf.set(pinned, stream=self._copy_stream)
        done = cp.cuda.Event(disable_timing=True)
        done.record(self._copy_stream)
        return done

    def await_staged(self, tokens) -> None:
        stream = self.cp.cuda.get_current_stream()
        for done in tokens:
            if done is not None:
                stream.wait_event(done)

    def read(self, buf, count: int, dtype: str, wait: bool):
        """A small result that ends the call (a reduction's slots: one read) is copied into
        pinned host memory by an asynchronous copy on the launches' stream, then one
        synchronize waits for kernels and copy together; larger ones through CuPy's get()."""
        nbytes = count * np.dtype(dtype).itemsize
        if not wait or nbytes > PINNED_READ_BYTES:
            return buf[:count].get()       # synchronises the stream either way
        cp = self.cp
        if self._readback is None:
            self._readback = np.frombuffer(cp.cuda.alloc_pinned_memory(PINNED_READ_BYTES), np.uint8)
        host = self._readback[:nbytes]
        stream = cp.cuda.get_current_stream()
        cp.cuda.runtime.memcpyAsync(host.ctypes.data, buf.data.ptr, nbytes,
                                    cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        stream.synchronize()
        return host.view(dtype).copy()     # the pinned bytes are the next read's

    def finish(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()

    def keeps_results(self, inputs) -> bool:
        return any(_is_cupy(x) for x in inputs)

    device_columns = CAPS.device_columns       # CuPy arrays between a staged plan's stages

    def hand_over(self, buf, count: int, dtype: str = ""):
        return buf[:count]

    def elapsed_ms(self, token) -> float:
        if token is None:                  # untimed (QUERYCOMPUTE_KERNEL_TIMES off)
            return float("nan")
        start, end = token
        end.synchronize()                  # results left on the device: nothing waited yet
        return self.cp.cuda.get_elapsed_time(start, end)


class CudaPrepared(GpuPrepared):
    """Binaries for every target (CUBIN and PTX); loaded on each device at its first run,
    with a launch loop per device (buffers live on one device)."""
    dialect = "cuda"

    def __init__(self, backend: "CudaBackend", p: Pass, ks: L.KernelSet,
                 binaries: dict[str, bytes], origin: str, compile_ms: float):
        super().__init__(ks, origin, compile_ms)
        self.backend, self.p, self.binaries = backend, p, binaries
        self.modules = DeviceModules(self._load)
        self._loops: dict[int, LaunchLoop] = {}

    def _load(self, device: CudaDevice) -> dict[str, Any]:
        import cupy as cp
        image = pick_image(self.binaries, device.arch)
        if image is None:         # another GPU than the one prepare compiled for: compile for it
            extra, _, _ = cached_binaries(self.p, self.ks, targets(device.arch))
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

    def loop(self) -> LaunchLoop:
        """The launch loop of CuPy's current device (BackendUnavailableError without one)."""
        self.backend.device()
        import cupy as cp
        device = self.backend.device(current_index())
        loop = self._loops.get(device.index)
        if loop is None:
            loop = self._loops[device.index] = LaunchLoop(self.ks, CudaRuntime(cp, self.modules.functions(device)))
        return loop


class CudaBackend(GeneratedSourceBackend):
    name = "cuda"
    dialect = "cuda"
    caps = CAPS

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
        binaries, origin, compile_ms = cached_binaries(p, ks, archs)
        return CudaPrepared(self, p, ks, binaries, origin, compile_ms)
