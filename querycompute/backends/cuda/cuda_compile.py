"""CUDA C -> CUBIN / PTX with NVRTC, called through `cupy.cuda.nvrtc` directly.

No device is needed: the target architecture is always passed explicitly. (CuPy's
`cupy.cuda.compiler` helpers ask the current device for its arch, so they fail on a machine
without one.) Targets are spelled as NVRTC spells them: "sm_80" gives a CUBIN for that GPU
generation, "compute_80" gives PTX that the driver can JIT for newer ones. Which arch a
device gets is `choose_targets` (a pure function); the CUBIN is read whole by cuda_cubin.
`cached_binaries` goes through the disk kernel cache (DiskCache.obtain, the sequence every
binary-caching backend shares).
"""
from __future__ import annotations

import re
from typing import Sequence

from ... import config
from ...errors import BackendUnavailableError, CompileError, QueryError
from .cuda_cubin import read_cubin

ARCH_VAR = "QUERYCOMPUTE_CUDA_ARCH"
DEFAULT_ARCH = "sm_80"
INSTALL_HINT = "pip install 'querycompute[cuda12]' (or 'querycompute[cuda13]')"
_ARCH = re.compile(r"^(?:(sm|compute)_)?(\d{2,3})[a-z]?$")


def nvrtc():
    """The cupy.cuda.nvrtc module, or BackendUnavailableError saying what to install."""
    try:
        from cupy.cuda import nvrtc as mod
        mod.getVersion()                 # loads libnvrtc: fails here when it is missing
    except ImportError as exc:
        raise BackendUnavailableError(f"cupy is not installed ({exc}); {INSTALL_HINT}") from None
    except Exception as exc:             # cupy present, NVRTC library missing or broken
        raise BackendUnavailableError(
            f"NVRTC could not be loaded ({type(exc).__name__}: {exc}); "
            f"pip install nvidia-cuda-nvrtc-cu12, or {INSTALL_HINT}") from None
    return mod


def nvrtc_version() -> tuple[int, int]:
    return tuple(nvrtc().getVersion())


def parse_arch(text: str, origin: str = "arch") -> tuple[str, int]:
    """'sm_90' / 'compute_90' / '90' / '9.0' -> (kind, number): ('sm', 90), ('compute', 90)."""
    cleaned = text.strip().lower()
    if re.fullmatch(r"\d{1,2}\.\d", cleaned):     # a compute capability, e.g. 8.6
        cleaned = cleaned.replace(".", "")
    m = _ARCH.match(cleaned)
    if not m:
        raise QueryError(f"{origin} {text!r} is not a CUDA architecture; write it as sm_80 "
                         f"(a CUBIN), compute_80 (PTX), 80 or 8.0")
    return (m.group(1) or "sm"), int(m.group(2))


def targets(device_arch: int | None = None) -> list[str]:
    """What to compile for, by choose_targets from $QUERYCOMPUTE_CUDA_ARCH, the device's
    compute capability (or sm_80 without a device) and the archs this NVRTC supports."""
    return choose_targets(device_arch, supported_archs(), config.get(ARCH_VAR),
                          ".".join(map(str, nvrtc_version())))


def choose_targets(device_arch: int | None, supported: Sequence[int], env: str | None = None,
                   version: str = "") -> list[str]:
    """The arch rule (pure: no NVRTC, no device, no environment read here).

    - `env` (QUERYCOMPUTE_CUDA_ARCH) set: exactly that arch, a CUBIN plus its PTX ("sm_90",
      "90", "9.0") or PTX only ("compute_90"); an arch `supported` lacks is unavailable.
    - else the device's arch (sm_80 without a device): its CUBIN plus PTX when `supported`
      lists it (or is empty: an old NVRTC that can't say). A device newer than every arch
      this NVRTC knows gets PTX for the highest supported arch below it, which the driver
      JIT-compiles forward; a device older than all of them can't be served.
    Unavailable means BackendUnavailableError, so `auto` falls back to another backend.
    """
    known = ", ".join(f"sm_{a}" for a in supported)
    nvrtc_name = f"NVRTC {version}".strip()
    if env and env.strip():
        kind, number = parse_arch(env, f"${ARCH_VAR}")
        if supported and number not in supported:
            raise BackendUnavailableError(
                f"CUDA architecture {kind}_{number} is not supported by {nvrtc_name}; "
                f"supported: {known} (set ${ARCH_VAR})")
        return [f"compute_{number}"] if kind == "compute" else [f"sm_{number}", f"compute_{number}"]
    number = device_arch if device_arch is not None else parse_arch(DEFAULT_ARCH)[1]
    if not supported or number in supported:
        return [f"sm_{number}", f"compute_{number}"]
    below = [a for a in supported if a <= number]
    if not below:
        raise BackendUnavailableError(
            f"the CUDA device (sm_{number}) is older than every architecture {nvrtc_name} "
            f"can compile for ({known}); use a CuPy/NVRTC built for an older CUDA toolkit")
    return [f"compute_{max(below)}"]


def supported_archs() -> tuple[int, ...]:
    try:
        return tuple(int(a) for a in nvrtc().getSupportedArchs())
    except AttributeError:               # very old NVRTC: no query, let the compile decide
        return ()


def options_for(arch: str, options: Sequence[str]) -> list[str]:
    return [*options, f"--gpu-architecture={arch}"]


def compile_cuda(source: str, options: Sequence[str] = (), arch: str | None = None) -> bytes:
    """Compile `source` for `arch` ("sm_80" -> CUBIN bytes, "compute_80" -> PTX bytes; default
    the first of `targets()`). Raises CompileError with the NVRTC log and the line-numbered
    source, BackendUnavailableError when cupy/NVRTC is missing."""
    if arch is None:
        arch = targets()[0]
    kind, number = parse_arch(arch)
    arch = f"{kind}_{number}"
    mod = nvrtc()
    opts = options_for(arch, options)
    prog = mod.createProgram(source, "querycompute.cu", [], [])
    try:
        try:
            mod.compileProgram(prog, opts)
        except mod.NVRTCError as exc:
            log = mod.getProgramLog(prog) or str(exc)
            raise CompileError("cuda", log, source, opts) from None
        return read_cubin(mod, prog) if kind == "sm" else mod.getPTX(prog)
    finally:
        mod.destroyProgram(prog)


def cached_binaries(p, ks, archs: Sequence[str]) -> tuple[dict[str, bytes], str, float]:
    """({target: CUBIN or PTX}, "disk" or "compiled", compile ms) for kernel set `ks` of pass
    `p`, one disk-cache entry per target (DiskCache.obtain: load, else compile under the
    cross-process compile lock and store). Needs no device."""
    from ...cache import disk_cache, dump_source, make_key
    compiler = "nvrtc {}.{}".format(*nvrtc_version())
    names = [k.name for k in ks.kernels]
    binaries, origin, compile_ms = {}, "disk", 0.0
    for arch in archs:
        key = make_key(backend="cuda", compiler=compiler, device=arch,
                       options=options_for(arch, ks.options), source=ks.source)

        def compile_fn(arch=arch):
            dump_source(p.name, "cuda", ks.source)
            payload = compile_cuda(ks.source, ks.options, arch)
            return payload, payload

        binaries[arch], got, ms = disk_cache.obtain(
            key, compile_fn, lambda payload: payload, source_suffix=".cu", kernel_names=names,
            dtypes=[s.dtype for s in p.program.inputs], extra={"arch": arch})
        if got == "compiled":
            origin, compile_ms = "compiled", compile_ms + ms
    return binaries, origin, compile_ms
