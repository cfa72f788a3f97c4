"""Compiler and device identity strings for cache keys, one helper per toolchain.

Backends may build these strings themselves; the helpers exist so that every backend puts
the versions that change a binary into its key (issue 6, point 2) and none is forgotten.
Each helper takes already-imported objects or imports its toolchain lazily, so importing
this module costs nothing.
"""
from __future__ import annotations

import platform
import sys


def numba_identity() -> tuple[str, str]:
    """(compiler, device) for the cpu backend: numba, llvmlite and Python versions (numba's
    own cache files are Python-version specific) and the host CPU LLVM compiles for."""
    import llvmlite
    import llvmlite.binding as llvm
    import numba
    compiler = (f"numba {numba.__version__} llvmlite {llvmlite.__version__} "
                f"python {sys.version_info.major}.{sys.version_info.minor}")
    device = f"{platform.machine()} {llvm.get_host_cpu_name()}"
    return compiler, device


def opencl_identity(device) -> tuple[str, str]:
    """(compiler, device) for a pyopencl Device: the platform (the OpenCL compiler ships with
    it) with its version, the driver version, and the device name, vendor and version."""
    plat = device.platform
    compiler = f"{plat.name} {plat.version} / driver {device.driver_version}"
    device_id = f"{device.name} / {device.vendor} / {device.version}"
    return compiler, device_id


def nvrtc_identity(arch: str) -> tuple[str, str]:
    """(compiler, device) for CUDA via CuPy's NVRTC binding; `arch` is the target the source
    is compiled for (e.g. "sm_80" or "compute_80"), which is what identifies the device."""
    import cupy
    from cupy.cuda import nvrtc
    major, minor = nvrtc.getVersion()
    return f"nvrtc {major}.{minor} cupy {cupy.__version__}", arch
