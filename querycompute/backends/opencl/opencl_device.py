"""OpenCL device selection and program building (PyOpenCL), through the disk kernel cache.

`cached_program` is the one place a program is made: rebuilt from the program binary an
earlier process stored for this device (docs/cache.md), else compiled from source by
`build_program` and its binary stored.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ...cache import CacheWarning, disk_cache, dump_source, opencl_identity
from ...errors import CompileError
from ...log import native_stderr, warn
from .opencl_build import build_quietly

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

    @cached_property
    def zero_copy(self) -> bool:
        """Kernels read the caller's arrays in place (CL_MEM_USE_HOST_PTR) instead of copies.
        On a CPU device "device memory" is host memory, so the upload is a memcpy that costs
        as much as W1's whole kernel at 1e7 elements; a GPU needs the transfer (and may
        answer USE_HOST_PTR with a hidden copy per launch), so GPUs keep device buffers."""
        return bool(self.device.type & self.cl.device_type.CPU)

    @property
    def description(self) -> str:
        return f"{self.device.platform.name.strip()} / {self.device.name.strip()}"

    @cached_property
    def identity(self) -> tuple[str, str]:
        """(compiler, device) for cache keys: platform, driver and device versions."""
        return opencl_identity(self.device)


def find_gpu() -> bool:
    """Whether an OpenCL platform lists a GPU device, asked without making a context (so
    pocl's CPU device is never opened by `auto`)."""
    try:
        import pyopencl as cl
    except ImportError:
        return False
    with native_stderr("OpenCL's GPU query"):      # (an ICD's chatter: to the logger)
        return _lists_gpu(cl)


def _lists_gpu(cl) -> bool:
    try:
        platforms = cl.get_platforms()
    except cl.Error:                           # no platform
        return False
    for platform in platforms:
        try:
            if platform.get_devices(device_type=cl.device_type.GPU):
                return True
        except cl.Error:                       # CL_DEVICE_NOT_FOUND
            continue
    return False


def open_device() -> DeviceContext:
    """A GPU device when one exists, else any device (pocl's CPU device on CI machines); the
    first, in that order, that builds a probe kernel (`probe`). Raises RuntimeError saying
    why when PyOpenCL or every device is missing, or when no device can compile."""
    try:
        import pyopencl as cl
    except ImportError as exc:
        raise RuntimeError(f"pyopencl is not importable ({exc}); {INSTALL_HINT}") from None
    with native_stderr("opening the OpenCL device"):
        return _open(cl)


def _open(cl) -> DeviceContext:
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:
        raise RuntimeError(f"no OpenCL platform ({exc}); {INSTALL_HINT}") from None
    devices = [d for p in platforms for d in p.get_devices()]
    if not devices:
        raise RuntimeError(f"OpenCL platforms {[p.name for p in platforms]} have no device; {INSTALL_HINT}")
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    refused = []
    for device in gpus + [d for d in devices if d not in gpus]:
        context = cl.Context([device])
        why = probe(cl, device, context)
        if not why:
            queue = cl.CommandQueue(context, device, properties=cl.command_queue_properties.PROFILING_ENABLE)
            return DeviceContext(cl, device, context, queue)
        refused.append(why)
    raise RuntimeError("; ".join(refused))


# A device can be listed and still compile nothing: the pocl of the pyopencl[pocl] wheel
# (pocl 3.0, LLVM 14) asks its clang for target CPU 'generic' on CPUs its LLVM predates (AMD
# Zen 5: "unknown target CPU 'generic'"), so every build fails. Each device is asked to
# build this kernel before it is used (once per device and process: ~0.1 s on pocl with its
# kernel cache warm, 1 s cold); one that can't is passed over, and when none can, the
# backend is unavailable with the compiler's reason. Only opening the device probes: not
# importing querycompute, and not `auto`, which opens no CPU device (find_gpu).
PROBE_SOURCE = "__kernel void querycompute_probe(__global int *x) { x[get_global_id(0)] += 1; }"
_probed: dict[int, str] = {}       # device handle -> "" (it builds) or why it can't


def probe(cl, device, context) -> str:
    """"" when `device` builds PROBE_SOURCE, else why not (the compiler's error line)."""
    key = device.int_ptr
    why = _probed.get(key)
    if why is None:
        try:
            build_quietly(cl, context, device, PROBE_SOURCE, [])
            why = ""
        except CompileError as exc:
            why = _cannot_compile(device, exc.log)
        except cl.Error as exc:           # the driver refused the program itself
            why = _cannot_compile(device, str(exc))
        _probed[key] = why
    return why


def _cannot_compile(device, log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    error = next((line.split("error:", 1)[1].strip() for line in lines if "error:" in line),
                 lines[0] if lines else "the build failed without a log")
    name = f"{device.platform.name.strip()} / {device.name.strip()}"
    version = " ".join(device.platform.version.split())
    if "unknown target CPU" in error and "pocl" in version.lower():
        return (f"pocl cannot compile for this CPU: {error} ({name}, {version}: its LLVM does "
                f"not know this CPU; another pocl, such as Debian's pocl-opencl-icd, may)")
    return f"the OpenCL device {name} cannot compile a kernel: {error}"


def build_program(ctx, device, source: str, options) -> object:
    """Compile OpenCL C `source` for `device` -> cl.Program; CompileError with the build log."""
    import pyopencl as cl
    # Not PyOpenCL's Program.build: its binary cache would duplicate ours (and a build it
    # served would be reported as a compile), and the driver's warnings must not reach the
    # user's stderr (opencl_build.py).
    return build_quietly(cl, ctx, device, source, list(options))


def program_from_binary(ctx, device, binary: bytes, options) -> object:
    """Rebuild a program from a binary an earlier `build_program` produced (cl.Error when
    the driver refuses it)."""
    import pyopencl as cl
    return cl.Program(ctx, [device], [binary]).build(options=list(options), devices=[device])


def cached_program(dev: DeviceContext, source: str, options, kernel_names,
                   dtypes=()) -> tuple[object, str]:
    """(built cl.Program, "disk" or "compiled") for `source` on `dev`. The key holds the
    platform, driver and device identity, the options and the source, so a binary is only
    ever handed to the device (and driver) that made it."""
    compiler, device_id = dev.identity
    key = disk_cache.make_key(backend="opencl", compiler=compiler, device=device_id,
                              options=options, source=source)

    def use(binary: bytes):
        try:
            return program_from_binary(dev.context, dev.device, binary, options)
        except dev.cl.Error as exc:
            # The bytes are the ones stored (their hash checked), yet this driver refuses
            # them, e.g. after an update that kept its version string: rebuild and replace.
            warn(f"querycompute: the OpenCL driver rejected cached program binary "
                 f"{key.digest[:16]} ({exc}); recompiling and rewriting it", CacheWarning)
            return None

    def compile_fn():
        dump_source(kernel_names[0] if len(kernel_names) == 1 else ", ".join(kernel_names),
                    "opencl", source)
        program = build_program(dev.context, dev.device, source, options)
        return program.binaries[0], program

    program, origin, _ = disk_cache.obtain(key, compile_fn, use, source_suffix=".cl",
                                           kernel_names=kernel_names, dtypes=dtypes,
                                           extra={"device": dev.description})
    return program, origin
