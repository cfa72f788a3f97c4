"""OpenCL device selection and program building (PyOpenCL).

`build_program` is the one place a program is compiled, so the kernel cache can wrap it (or
use `program_from_binary` with a binary it stored: `program.binaries[0]` after a build).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import CompileError

INSTALL_HINT = "pip install 'querycompute[opencl]' (PyOpenCL with the pocl CPU device)"


@dataclass
class DeviceContext:
    """The device the backend runs on, with its context and a profiling queue."""
    cl: object             # the pyopencl module
    device: object
    context: object
    queue: object

    @property
    def is_gpu(self) -> bool:
        return bool(self.device.type & self.cl.device_type.GPU)

    @property
    def has_fp64(self) -> bool:
        return "cl_khr_fp64" in self.device.extensions or bool(getattr(self.device, "double_fp_config", 0))

    @property
    def description(self) -> str:
        return f"{self.device.platform.name.strip()} / {self.device.name.strip()}"


def open_device() -> DeviceContext:
    """A GPU device when one exists, else any device (pocl's CPU device on CI machines).
    Raises RuntimeError saying why when PyOpenCL or every device is missing."""
    try:
        import pyopencl as cl
    except ImportError as exc:
        raise RuntimeError(f"pyopencl is not importable ({exc}); {INSTALL_HINT}") from None
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:
        raise RuntimeError(f"no OpenCL platform ({exc}); {INSTALL_HINT}") from None
    devices = [d for p in platforms for d in p.get_devices()]
    if not devices:
        raise RuntimeError(f"OpenCL platforms {[p.name for p in platforms]} have no device; {INSTALL_HINT}")
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    device = (gpus or devices)[0]
    context = cl.Context([device])
    queue = cl.CommandQueue(context, device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    return DeviceContext(cl, device, context, queue)


def build_program(ctx, device, source: str, options) -> object:
    """Compile OpenCL C `source` for `device` -> cl.Program; CompileError with the build log."""
    import pyopencl as cl
    try:
        return cl.Program(ctx, source).build(options=list(options), devices=[device])
    except cl.Error as exc:
        raise CompileError("opencl", str(exc), source, options) from None


def program_from_binary(ctx, device, binary: bytes, options) -> object:
    """Rebuild a program from a binary an earlier `build_program` produced."""
    import pyopencl as cl
    return cl.Program(ctx, [device], [binary]).build(options=list(options), devices=[device])
