"""The disk-cache key: a SHA-256 over everything that changes the compiled binary.

Never Python's hash() (salted per process) and never anything time-dependent, so every
process on every day computes the same key for the same binary-relevant inputs.
"""
from __future__ import annotations

import glob
import hashlib
import importlib.util
import json
import os
import platform
import sys
from dataclasses import dataclass
from functools import lru_cache

# Bump when the entry layout, the binary header or the key recipe changes: old entries then
# simply stop matching (they live under another "v<N>" directory and are never read).
FORMAT_VERSION = 1

# Every backend name: the cache keys and lists entries by them (`qc.cache.clear(backend=...)`
# checks a name against this), and backends/registry.py makes one Backend per name.
BACKENDS = ("numpy", "cpu", "cuda", "opencl", "webgpu", "metal")


@lru_cache(maxsize=1)
def package_version() -> str:
    from importlib import metadata      # here, not at import: it costs ~20 ms to import
    try:
        return metadata.version("querycompute")
    except metadata.PackageNotFoundError:     # running from a source tree that isn't installed
        return "0+unknown"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class CacheKey:
    """A disk-cache key and the parts it was made of (kept so metadata can record them).

    `digest` is the 64-hex-digit SHA-256 that names the entry; `source` is the final source
    text, kept so `store` can write it next to the binary without being handed it twice."""
    digest: str
    backend: str
    compiler: str
    device: str
    options: tuple[str, ...]
    source: str
    source_sha256: str

    def __str__(self) -> str:
        return self.digest


def make_key(*, backend: str, compiler: str, device: str, options=(), source: str) -> CacheKey:
    """Key for the binary that `compiler` (name and version, e.g. "nvrtc 12.9" or
    "numba 0.68.1 llvmlite 0.50.0") makes from `source` with `options` for `device` (its
    identity or arch, e.g. "sm_80" or "pocl 6.0 / cpu-haswell / driver 6.0").
    The cache format version and the package version are added here."""
    for name, value in (("backend", backend), ("compiler", compiler), ("device", device),
                        ("source", source)):
        if not isinstance(value, str):
            raise TypeError(f"make_key: {name} must be a str, got {type(value).__name__}")
    if not backend or not compiler:
        raise ValueError("make_key: backend and compiler must name something; an empty "
                         "compiler identity would let a compiler upgrade reuse stale binaries")
    if isinstance(options, str):
        raise TypeError("make_key: options must be a sequence of strings, not one string "
                        "(pass ('-O3',) rather than '-O3')")
    options = tuple(options)
    if not all(isinstance(o, str) for o in options):
        raise TypeError("make_key: every option must be a str")
    source_sha = sha256_hex(source.encode("utf-8"))
    recipe = {
        "format": FORMAT_VERSION,
        "package": package_version(),
        "backend": backend,
        "compiler": compiler,
        "device": device,
        "options": list(options),      # order kept: compilers may care about it
        "source_sha256": source_sha,
    }
    canonical = json.dumps(recipe, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return CacheKey(sha256_hex(canonical.encode("ascii")), backend, compiler, device,
                    options, source, source_sha)


# ---- compiler and device identities ---------------------------------------------------------
# Compiler and device identity strings for cache keys, one helper per toolchain.
#
# Backends may build these strings themselves; the helpers exist so that every backend puts
# the versions that change a binary into its key (issue 6, point 2) and none is forgotten.
# Each helper takes already-imported objects or imports its toolchain lazily, so importing
# this module costs nothing.


def _installed_version(package: str) -> str:
    """An installed package's version, from the name of its dist-info folder beside it
    (importlib.metadata's answer without importing that module: ~10-40 ms), else from
    importlib.metadata."""
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.origin:
        site = os.path.dirname(os.path.dirname(spec.origin))
        found = glob.glob(os.path.join(glob.escape(site), f"{package}-*.dist-info"))
        if len(found) == 1:
            return os.path.basename(found[0])[len(package) + 1:-len(".dist-info")]
    from importlib.metadata import version
    return version(package)


def numba_identity(imported: bool = True) -> tuple[str, str]:
    """(compiler, device) for the cpu backend: numba, llvmlite and Python versions (numba's
    own cache files are Python-version specific) and the host CPU LLVM compiles for.
    imported=False: numba's version read from its installed metadata, numba not imported."""
    import llvmlite
    import llvmlite.binding as llvm
    if imported:
        import numba
        version = numba.__version__
    else:
        version = _installed_version("numba")
    compiler = (f"numba {version} llvmlite {llvmlite.__version__} "
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
