"""The WebGPU device of this process (wgpu-py), and shader modules through the disk cache.

One adapter, device and queue per process, opened on first use under a lock
(`open_device`). wgpu-native picks Vulkan, Metal or D3D12 (WGPU_BACKEND_TYPE forces one; CI
sets Vulkan so nothing silently lands on OpenGL); Mesa's lavapipe / llvmpipe are CPU
adapters, which run the tests but are never chosen by `auto`.

wgpu keeps no binary of a compiled shader, so the disk cache entry of a kernel set is its
validated WGSL with the usual metadata (`querycompute cache list` shows it): a later process
finds it, recreates the module from it and is told "disk".
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ...cache import disk_cache, dump_source
from ...errors import CompileError
from ...log import native_stderr

INSTALL_HINT = ("pip install 'querycompute[webgpu]' (wgpu-py), and a Vulkan, Metal or D3D12 driver "
                "(on Debian/Ubuntu without a GPU: apt-get install mesa-vulkan-drivers libvulkan1)")
CPU_ADAPTERS = ("llvmpipe", "lavapipe", "swiftshader", "warp")


@dataclass
class WebGPUDevice:
    wgpu: object              # the wgpu module
    adapter: object
    device: object
    queue: object
    info: dict
    features: frozenset
    limits: dict
    lock: threading.Lock = field(default_factory=threading.Lock)   # queue submissions and reads
    timer: object = None      # webgpu_timing's kernel timer, made on first launch

    @property
    def is_cpu(self) -> bool:
        """A software adapter (lavapipe, llvmpipe, SwiftShader, WARP): tests only."""
        return is_cpu_adapter(self.info)

    @property
    def max_binding(self) -> int:
        return int(self.limits["max-storage-buffer-binding-size"])

    @property
    def max_groups_per_dim(self) -> int:
        return int(self.limits["max-compute-workgroups-per-dimension"])

    @property
    def description(self) -> str:
        i = self.info
        return (f"{i.get('device') or i.get('vendor')} ({i.get('backend_type')}, {i.get('adapter_type')}; "
                f"{i.get('description', '')}); max storage binding {self.max_binding >> 20} MiB, "
                f"{self.max_groups_per_dim} workgroups per dimension"
                + ("; shader-f16" if "shader-f16" in self.features else ""))

    @property
    def identity(self) -> tuple[str, str]:
        """(compiler, device) for cache keys: wgpu-native's version and the adapter."""
        i = self.info
        compiler = f"wgpu-py {getattr(self.wgpu, '__version__', '?')} / {i.get('backend_type')}"
        device = f"{i.get('vendor')} / {i.get('device')} / {i.get('description')}"
        return compiler, device


def is_cpu_adapter(info: dict) -> bool:
    """Whether an adapter's info names a software adapter (CPU_ADAPTERS, or type CPU)."""
    name = f"{info.get('device', '')} {info.get('vendor', '')}".lower()
    return str(info.get("adapter_type", "")).lower() == "cpu" or any(c in name for c in CPU_ADAPTERS)


def find_gpu_adapter() -> bool:
    """Whether wgpu offers a GPU adapter, asked without creating a device (so `auto` never
    opens lavapipe / llvmpipe)."""
    try:
        import wgpu
    except ImportError:
        return False
    try:
        adapter = _request_adapter(wgpu)
    except Exception:                           # wgpu raises its own errors, or RuntimeError
        return False
    return adapter is not None and not is_cpu_adapter(dict(adapter.info))


_lock = threading.Lock()
_device: WebGPUDevice | None = None
_why = ""


def open_device() -> WebGPUDevice:
    """The process's device, opened once (thread-safe). RuntimeError saying why when wgpu
    or every adapter is missing (the reason is kept: the next call raises it again)."""
    global _device, _why
    with _lock:
        if _device is None and not _why:
            try:
                _device = _open()
            except RuntimeError as exc:
                _why = str(exc)
        if _device is None:
            raise RuntimeError(_why)
        return _device


def _open() -> WebGPUDevice:
    try:
        import wgpu
    except ImportError as exc:
        raise RuntimeError(f"wgpu is not importable ({exc}); {INSTALL_HINT}") from None
    try:
        adapter = _request_adapter(wgpu)
    except Exception as exc:                    # wgpu raises its own errors, or RuntimeError
        raise RuntimeError(f"no WebGPU adapter ({type(exc).__name__}: {exc}); {INSTALL_HINT}") from None
    if adapter is None:
        raise RuntimeError(f"no WebGPU adapter; {INSTALL_HINT}")
    limits = dict(adapter.limits)
    # the adapter's largest storage binding and buffer, not WebGPU's 128 MiB default
    wanted = {k: limits[k] for k in ("max-storage-buffer-binding-size", "max-buffer-size",
                                     "max-storage-buffers-per-shader-stage") if k in limits}
    # timestamp queries time each kernel on the device (backends/webgpu_timing.py)
    features = [f for f in ("timestamp-query",) if f in adapter.features]
    device = adapter.request_device_sync(required_limits=wanted, required_features=features)
    info = {k: str(v) for k, v in dict(adapter.info).items()}
    return WebGPUDevice(wgpu, adapter, device, device.queue, info, frozenset(adapter.features), dict(device.limits))


def _request_adapter(wgpu):
    """wgpu's adapter, asked with fd 2 captured (log.native_stderr): wgpu-native and the
    Vulkan loader print while they enumerate (wgpu's "Forcing backend: Vulkan" through
    logging's last resort, Mesa's "XDG_RUNTIME_DIR is invalid"); it goes to the logger."""
    with native_stderr("wgpu's adapter request"):
        return wgpu.gpu.request_adapter_sync(power_preference="high-performance")


def build_module(dev: WebGPUDevice, source: str):
    """A shader module from WGSL `source`; CompileError with naga's message and the
    line-numbered WGSL when it does not validate."""
    try:
        return dev.device.create_shader_module(code=source)
    except Exception as exc:                    # wgpu.GPUValidationError and friends
        raise CompileError("webgpu", f"{type(exc).__name__}: {exc}", source) from None


def cached_module(dev: WebGPUDevice, source: str, kernel_names, dtypes=()) -> tuple[object, str]:
    """(shader module, "disk" or "compiled"): the disk entry holds the validated WGSL."""
    compiler, device_id = dev.identity
    key = disk_cache.make_key(backend="webgpu", compiler=compiler, device=device_id, source=source)

    def use(payload: bytes):
        text = payload.decode("utf-8", "replace")
        return build_module(dev, text) if text == source else None

    def compile_fn():
        dump_source(", ".join(kernel_names), "webgpu", source)
        return source.encode("utf-8"), build_module(dev, source)

    module, origin, _ = disk_cache.obtain(key, compile_fn, use, source_suffix=".wgsl",
                                          kernel_names=kernel_names, dtypes=dtypes,
                                          extra={"device": dev.description})
    return module, origin
