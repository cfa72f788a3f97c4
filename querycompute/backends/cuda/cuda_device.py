"""Finding the CUDA device through CuPy, without crashing when CuPy or the driver is missing."""
from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass

from .cuda_compile import INSTALL_HINT


@dataclass(frozen=True)
class CudaDevice:
    index: int
    name: str
    arch: int              # compute capability as NVRTC numbers it: 8.6 -> 86

    @property
    def description(self) -> str:
        return f"CUDA device {self.index}: {self.name} (sm_{self.arch})"


def _no_driver() -> str:
    """Why the CUDA driver library does not load ("" when it does): checked before CuPy is
    imported (~0.1 s), so `auto` on a machine without an NVIDIA driver pays a dlopen only."""
    if sys.platform == "darwin":
        return "macOS has no CUDA driver"
    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        ctypes.CDLL(name)
    except OSError as exc:
        return f"{name} does not load ({exc})"
    return ""


def probe() -> tuple[CudaDevice | None, str]:
    """(the current device, "") or (None, why not and what to install)."""
    why = _no_driver() if "cupy" not in sys.modules else ""
    if why:
        return None, (f"no CUDA driver ({why}); needs an NVIDIA GPU with its driver, and "
                      f"{INSTALL_HINT}")
    try:
        import cupy
    except ImportError as exc:
        return None, f"cupy is not installed ({exc}); {INSTALL_HINT}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError (no driver, driver too old), missing libcudart
        return None, (f"no usable CUDA driver/device ({type(exc).__name__}: {exc}); needs an "
                      f"NVIDIA GPU with a driver matching CuPy's CUDA version, and {INSTALL_HINT}")
    if count == 0:
        return None, "the CUDA driver reports no device"
    try:
        return describe(cupy.cuda.runtime.getDevice()), ""
    except Exception as exc:
        return None, f"the CUDA device could not be queried ({type(exc).__name__}: {exc})"


def current_index() -> int:
    """CuPy's current device (what `with cupy.cuda.Device(i):` selects): kernels launch there."""
    import cupy
    return cupy.cuda.runtime.getDevice()


def describe(index: int) -> CudaDevice:
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(index)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return CudaDevice(index, name, 10 * int(props["major"]) + int(props["minor"]))
