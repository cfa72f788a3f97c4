"""Which backends exist, which can run here, and which one `auto` picks.

Backend modules are imported lazily: a missing optional dependency (pyopencl, cupy) makes that
backend unavailable with a reason, never an ImportError at `import querycompute`.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
import threading

from .. import after_fork, config
from ..log import FallbackWarning, logger, warn
from ..errors import BackendUnavailableError, QueryError
from .base import Backend
from ..cache.keys import BACKENDS
from ..locks import IMPORT_LOCK

NAMES = BACKENDS
_MODULES = {
    "numpy": ("reference.numpy_ref", "NumpyBackend"),
    "cpu": ("cpu.cpu", "CpuBackend"),
    "cuda": ("cuda.cuda", "CudaBackend"),
    "opencl": ("opencl.opencl", "OpenCLBackend"),
    "webgpu": ("webgpu.webgpu", "WebGPUBackend"),
    "metal": ("metal.metal", "MetalBackend"),
}
_instances: dict[str, Backend] = {}
_broken: dict[str, str] = {}       # backends that failed at run time in this process: why

# Backends whose driver runs threads of its own: once initialised, they can't be used in a
# process forked afterwards (after_fork.py).
NOT_FORK_SAFE = ("cuda", "opencl", "webgpu")


def _after_fork() -> None:
    for name in NOT_FORK_SAFE:
        b = _instances.get(name)
        if b is not None and getattr(b, "initialised", True) and name not in _broken:
            _broken[name] = (f"unusable in this process: {name} was initialised in the parent "
                             f"before this process was "
                             f"forked, and its driver's threads do not survive fork(); use the "
                             f"'spawn' start method (multiprocessing.set_start_method('spawn')) "
                             f"or first use {name} in the child")
    _auto.clear()


after_fork.register(_after_fork)


def get(name: str) -> Backend:
    """The backend object (even when it can't run here: source generation needs no device)."""
    b = _instances.get(name)
    if b is None:
        if name not in _MODULES:
            raise QueryError(f"unknown backend {name!r}; choose one of: auto, {', '.join(NAMES)}")
        with IMPORT_LOCK:
            b = _instances.get(name)
            if b is None:
                mod, cls = _MODULES[name]
                b = getattr(importlib.import_module(f"{__package__}.{mod}"), cls)()
                _instances[name] = b
    return b


# IMPORT_LOCK (locks.py): every module a compile needs is imported under it, once.
_loaded: set[str] = set()
# per backend: (the compiler's modules, this package's backend modules: backends/<folder>/
# and backends/<module>.py by name)
_GPU = ("gpu.", "stage_runtime")
_COMPILER = {
    # the cpu backend's own compiler is llvmlite (its llvm route: backends/cpu/llvm_loader.py);
    # numba, which takes 0.3 s to import, is loaded by the first pass or kernel module that
    # needs it (numba_loader: load_compiler("numba"), under the same lock)
    # (filelock, for the disk cache's compile lock, only on a miss: import_for_compile)
    "cpu": (("llvmlite.ir", "llvmlite.binding"), ("cpu.", "reference.", "stage_runtime")),
    "numba": (("numba", "numba.core.event", "numba.core.compiler_lock", "numba.core.cgutils",
               "numba.extending", "numba.cpython.unsafe.numbers", "numba.np.ufunc.parallel"), None),
    "opencl": (("filelock", "pyopencl"), ("opencl.",) + _GPU),
    "webgpu": (("filelock", "wgpu"), ("webgpu.",) + _GPU),
    "cuda": (("filelock", "cupy"), ("cuda.",) + _GPU),
    "metal": (("filelock",), ("metal.",) + _GPU),
}
# this package's modules no compile imports (optional integrations, the command line)
_NOT_COMPILE = ("dask", "cli", "__main__")


# what loading a backend's cached kernel needs (BackendCaps.fast_loads: the cpu llvm route's
# object file), imported by `load_for_disk_hit` instead of the whole walk a compile needs
_DISK_HIT = {"cpu": ("llvmlite.ir", "llvmlite.binding", "querycompute.backends.cpu.cpu_columns")}


def load_for_disk_hit(name: str) -> None:
    """Import, under IMPORT_LOCK, the modules that loading backend `name`'s kernel from the
    disk cache needs (`_DISK_HIT`; ~50 ms where load_compiler's walk of the package is ~170):
    the import lock's rule for a load that answers a first call (run/engine.py)."""
    if name in _loaded:
        return
    with IMPORT_LOCK:
        for mod in _DISK_HIT.get(name, ()):
            importlib.import_module(mod)




def load_compiler(name: str) -> None:
    """Import, under IMPORT_LOCK, every module a compile for backend
    `name` may import: the compiler (numba, pyopencl, wgpu, cupy: one that is missing is left
    for the compile to report), the backend's modules, the code generator and the query
    layer's modules. Once per backend and process; afterwards a dict lookup."""
    if name in _loaded:
        return
    if name == "numpy":                # the reference interpreter: nothing to compile
        get(name)
        return
    with IMPORT_LOCK:
        if name in _loaded:
            return
        compiler, prefixes = _COMPILER[name]
        for mod in compiler:
            try:
                importlib.import_module(mod)
            except Exception:          # missing or broken: the compile reports it, with why
                continue
            after_fork.arm(mod)        # its fork hooks, if any, run after ours
        package = __package__.rpartition(".")[0]
        for info in () if prefixes is None else pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
            short = info.name[len(package) + 1:]
            if short.endswith("_kernels"):       # module texts the cpu backend loads itself
                continue
            if short.startswith("backends."):
                if not short[len("backends."):].startswith(prefixes):
                    continue
            elif short.split(".")[0] in _NOT_COMPILE:
                continue
            importlib.import_module(info.name)
        if prefixes is not None:
            get(name)
        _loaded.add(name)
        if name == "numba" and "numba" in sys.modules:
            _hold_numba_compiler_lock()
        after_fork.arm(name)


def _hold_numba_compiler_lock() -> None:
    """numba's compiler lock, held by a thread compiling at a fork, would stay held in the
    child (its next compile would wait for ever), and LLVM's state would be mid-compile:
    a fork waits for the compile to end (once per process)."""
    try:
        from numba.core.compiler_lock import global_compiler_lock
    except ImportError:
        return
    if not getattr(global_compiler_lock, "_querycompute_fork_held", False):
        global_compiler_lock._querycompute_fork_held = True
        after_fork.hold(global_compiler_lock._lock, rank=1)     # (an RLock)


def availability(name: str) -> tuple[bool, str]:
    if name in _broken:
        return False, _broken[name]
    try:
        return get(name).availability()
    except ImportError as exc:  # the backend module itself needs a missing package
        return False, f"{exc}; install the matching extra, e.g. pip install 'querycompute[all]'"


def backends() -> dict[str, dict]:
    """qc.backends(): for every backend, whether it runs here and why (not)."""
    out = {}
    for name in NAMES:
        ok, why = availability(name)
        out[name] = {"available": ok, "reason": why}
    return out


def require(name: str) -> Backend:
    ok, why = availability(name)
    if not ok:
        raise BackendUnavailableError(f"backend {name!r} can't run here: {why}")
    return get(name)


def _numba_installed() -> tuple[bool, str]:
    import importlib.util
    if importlib.util.find_spec("numba") is None:
        return False, "numba is not installed; install it with: pip install numba"
    if config.numba_jit_disabled():
        return False, NUMBA_JIT_OFF
    return True, "numba installed"


NUMBA_JIT_OFF = ("NUMBA_DISABLE_JIT is set: numba compiles nothing, so the cpu backend can't "
                 "run (auto uses numpy); unset NUMBA_DISABLE_JIT to use it")


# Availability answered without importing the backend's module (for cpu, 35-60 ms of kernel
# compiler and printer imports): what a first call answered by the numpy tier checks, so it
# does not wait for imports its answer does not need.
_LIGHT_PROBES = {"cpu": _numba_installed}


def _light_availability(name: str) -> tuple[bool, str]:
    """availability(name), without importing the backend's module where a probe can tell."""
    probe = _LIGHT_PROBES.get(name)
    if probe is None or name in _broken or name in _instances:
        return availability(name)
    return probe()


def check(name: str) -> None:
    """Raise BackendUnavailableError unless `name` can run here; imports as little as it can
    (the backend module itself is imported when it compiles)."""
    ok, why = _light_availability(name)
    if not ok:
        raise BackendUnavailableError(f"backend {name!r} can't run here: {why}")


def gpu_threshold() -> int:
    """Smallest input (elements) worth sending to a GPU; QUERYCOMPUTE_GPU_MIN_ELEMENTS overrides
    (read on first use, not at import: a bad value can't break `import querycompute`; then
    kept, so the warm path does not consult the environment)."""
    global _THRESHOLD
    if _THRESHOLD is None:
        _THRESHOLD = config.get("QUERYCOMPUTE_GPU_MIN_ELEMENTS")
    return _THRESHOLD


_THRESHOLD: int | None = None


_auto: dict[bool, str] = {}        # large input? -> backend; forgotten when one breaks

def choose_auto(n: int, on_device: bool, heavy: bool = True, wide: bool = False) -> str:
    """cuda for CUDA-resident data; a real GPU for large host inputs whose plan does enough
    work per byte; else the cpu backend. `heavy` (graph.heavy): the plan reads its data many
    times (a radix sort: 8+ passes over the keys; distinct, group_by and joins sort or hash).
    A fused select/where/aggregate pass reads each byte once, which the CPU does from its own
    memory at least as fast as pageable PCIe (10-25 GB/s) delivers it; only a heavy plan pays
    for the copy (docs/backends.md, "Choosing a backend"). `wide`: the query reads 64-bit
    columns a backend without them (BackendCaps.wide_columns False: webgpu) refuses, such as
    dates (int64 ticks): such a backend is never chosen."""
    if on_device:
        return "cuda"
    large = heavy and n >= gpu_threshold()
    name = _auto.get(large)
    if name is None:
        name = _choose(large)
        _auto[large] = name
    if wide and not get(name).caps.wide_columns:
        return _choose(large, wide=True)
    return name


def auto_choice(n: int, heavy: bool = True) -> str | None:
    """The backend `auto` chose last time for host data of n elements (None if it has not
    chosen yet, or a backend broke since): lets a repeated call skip choose_auto."""
    return _auto.get(heavy and n >= (_THRESHOLD if _THRESHOLD is not None else gpu_threshold()))


def _choose(large: bool, wide: bool = False) -> str:
    if large:
        for name in ("cuda", "opencl", "webgpu"):     # a real GPU only (never lavapipe, pocl)
            if wide and not get(name).caps.wide_columns:
                continue
            if _runs_on_gpu(name):
                return name
    return "cpu" if _light_availability("cpu")[0] else "numpy"


def _runs_on_gpu(name: str) -> bool:
    """Whether backend `name` runs on a real GPU here. `gpu_possible` is asked first, so
    `auto` never opens a device it would not pick (pocl's CPU device, a CPU WebGPU adapter)
    and, on Linux without a GPU device file, never imports pyopencl or wgpu."""
    if name in _broken or not get(name).gpu_possible():
        return False
    return availability(name)[0] and getattr(get(name), "is_gpu", False)


def mark_broken(name: str, why: str) -> None:
    """A GPU backend failed at run time: warn once, never pick it again in this process."""
    if name not in _broken:
        _broken[name] = f"failed earlier in this process: {why}"
        _auto.clear()
        logger.info("backend %s failed at run time (%s); falling back to cpu", name, why)
        warn(f"querycompute: backend {name!r} failed ({why}); falling back to 'cpu' for "
             f"the rest of this process (see qc.last_trace())", FallbackWarning)
