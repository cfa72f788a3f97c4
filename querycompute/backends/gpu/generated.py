"""What every backend that runs generated GPU source shares: rendering a pass once (per
backend object) into a codegen KernelSet, its source text and its launch shapes.

Codegen errors (a type the dialect lacks, e.g. float64 on Metal) become QueryErrors that name
the backend and the type."""
from __future__ import annotations

import glob
import sys

from querycompute._codegen import launch as L
from querycompute._codegen.gpu import render
from querycompute._codegen.ir.program import Pass

from ...errors import QueryError, codegen_errors
from ..base import Backend
from ...artifacts import ArtifactCache


class GeneratedSourceBackend(Backend):
    """A Backend whose kernels are codegen's `dialect` (cuda, opencl, metal)."""

    def __init__(self):
        self._sets = ArtifactCache(f"{self.name}: kernel sets")     # Pass -> KernelSet

    def kernel_set(self, p: Pass) -> L.KernelSet:
        ks = self._sets.get(p)
        if ks is None:
            with codegen_errors(self.name):
                ks = render(p, self.dialect)
            self._sets.put(p, ks)
        return ks

    def source(self, p: Pass) -> str:
        return self.kernel_set(p).source

    def launch_shape(self, p: Pass, n: int) -> list[dict]:
        return L.launch_shapes(self.kernel_set(p), n)


class DeviceBackend(GeneratedSourceBackend):
    """A generated-source backend on one device of this process, opened on first use
    (`open_device`, a subclass's: raises RuntimeError with the reason when there is none)."""

    def __init__(self):
        self._dev = None
        self._why = ""
        super().__init__()

    def open_device(self):
        raise NotImplementedError

    def _device(self):
        if self._dev is None and not self._why:
            try:
                self._dev = self.open_device()
            except RuntimeError as exc:
                self._why = str(exc)
        return self._dev

    @property
    def initialised(self) -> bool:
        """Whether this process opened the device (then a forked child must not use it)."""
        return self._dev is not None

    def find_gpu(self) -> bool:
        """Whether the driver lists a GPU device, asked without opening one (a subclass's)."""
        raise NotImplementedError

    def gpu_possible(self) -> bool:
        """Answered without opening a device `auto` would not pick: the opened device's kind
        once there is one; else no on Linux without a GPU device file (nothing is imported,
        and no driver gets a chance to print); else `find_gpu`."""
        if self._dev is not None or self._why:
            return bool(self._dev is not None and self.is_gpu)
        return bool(gpu_device_files()) and self.find_gpu()

    def availability(self) -> tuple[bool, str]:
        dev = self._device()
        return (True, dev.description) if dev else (False, self._why)

    def require_device(self):
        """The device, or QueryError saying why this backend can't run here."""
        dev = self._device()
        if dev is None:
            raise QueryError(f"{self.name} backend unavailable: {self._why}")
        return dev


# Every Linux GPU driver (Mesa, NVIDIA, ROCm, WSL2's D3D12, Mali, Adreno) works through one of
# these device files; the CPU devices (pocl, lavapipe / llvmpipe) need none.
GPU_DEVICE_FILES = ("/dev/dri/renderD*", "/dev/nvidia[0-9]*", "/dev/kfd", "/dev/dxg",
                    "/dev/mali[0-9]*", "/dev/kgsl-3d0")


def gpu_device_files() -> list[str]:
    """The GPU device files of this Linux machine (empty: no GPU to find); elsewhere (macOS,
    Windows) a placeholder saying the drivers must be asked."""
    if not sys.platform.startswith("linux"):
        return [sys.platform]
    return [f for pattern in GPU_DEVICE_FILES for f in glob.glob(pattern)]
