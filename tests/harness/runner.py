"""Compile a CUDA C or MSL kernel source with the system C++ compiler and run it on the CPU.

    mod = build(source, "cuda")                  # or "metal"; cached per source hash
    mod.kernel("qc_map").launch(grid=4, block=256, args=[x, out, np.int64(n)])

Each kernel thread is a real thread (see include/qch_runtime.h for what is and is not
modelled). Arguments are numpy arrays (passed by pointer, so kernels write into them) and
numpy scalars (passed by value, or by reference to Metal `constant T&` parameters), in
signature order (Metal: in [[buffer(i)]] order).

Compiled modules are cached in a directory under the system temp dir keyed by the SHA-256 of
everything that goes into the compile (translation unit, preludes, flags, compiler
version), so a test session compiles each distinct kernel once, and later sessions not at all.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from .rewrite import KernelInfo, rewrite_cuda, rewrite_metal

INCLUDE = Path(__file__).parent / "include"
CXX = os.environ.get("QCH_CXX", "g++")
FLAGS = ("-std=c++20", "-O1", "-shared", "-fPIC", "-pthread",
         # IEEE-exact float math, as every backend promises: no contraction, no fast math.
         "-ffp-contract=off", "-fno-fast-math",
         "-Wno-attributes", "-Wno-unused-variable", "-Wno-unused-but-set-variable")
SCHEDULES = {"free": 0, "ascending": 1, "descending": -1, "alternate": 2}
PRELUDE = {"cuda": '#include "cuda_prelude.h"\n', "metal": ""}  # MSL includes <metal_stdlib> itself
_KIND = {1: "pointer", 2: "reference", 3: "int", 4: "uint", 5: "float", 6: "bool", 7: "other"}
_SCALAR = {("int", 1): np.int8, ("int", 2): np.int16, ("int", 4): np.int32, ("int", 8): np.int64,
           ("uint", 1): np.uint8, ("uint", 2): np.uint16, ("uint", 4): np.uint32,
           ("uint", 8): np.uint64, ("float", 2): np.float16, ("float", 4): np.float32,
           ("float", 8): np.float64, ("bool", 1): np.bool_}


class HarnessError(RuntimeError):
    """The kernel failed to compile or a launch failed (race/deadlock/divergence report)."""


def available() -> tuple[bool, str]:
    if shutil.which(CXX) is None:
        return False, f"no C++ compiler {CXX!r} on PATH (set QCH_CXX)"
    return True, ""


@lru_cache(maxsize=None)
def _compiler_identity() -> str:
    return subprocess.run([CXX, "--version"], capture_output=True, text=True).stdout.splitlines()[0]


def cache_dir() -> Path:
    d = Path(os.environ.get("QCH_CACHE_DIR") or
             Path(tempfile.gettempdir()) / f"querycompute-harness-{os.getuid()}")
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


def _prelude_text() -> str:
    return "".join(p.read_text() for p in sorted(INCLUDE.iterdir()))


def _trailer(kernels: list[tuple[str, KernelInfo]]) -> str:
    lines = ["\n// ---- entry points added by tests/harness/runner.py ----"]
    for ns, k in kernels:
        lines.append(
            f'extern "C" int qch_launch__{k.name}(const unsigned* g, const unsigned* b, void** a, '
            f"unsigned long shm, int schedule, char* err, unsigned long errlen) "
            f"{{ return ::qch::launch(&{ns}::{k.name}, g, b, a, shm, schedule, err, errlen); }}")
        lines.append(f'extern "C" int qch_describe__{k.name}(int* d, int max) '
                     f"{{ return ::qch::describe(&{ns}::{k.name}, d, max); }}")
    return "\n".join(lines) + "\n"


_INCLUDE_LINE = re.compile(r"(?m)^[ \t]*#[ \t]*include[^\n]*$")


def translation_unit(sources: Sequence[str], dialect: str) -> tuple[str, list[KernelInfo]]:
    """The C++ text the harness compiles for `sources`, and the kernels it holds. Each source
    goes into its own namespace, so several generated sources (each with its own copies of
    the semantic helpers) compile together; their #includes move to the top."""
    if dialect not in PRELUDE:
        raise ValueError(f"the harness runs 'cuda' or 'metal' sources, not {dialect!r}")
    rewrite = rewrite_cuda if dialect == "cuda" else rewrite_metal
    includes, parts, kernels = [PRELUDE[dialect]], [], []
    for i, source in enumerate(sources):
        body, found = rewrite(source)
        includes += [line.strip() + "\n" for line in _INCLUDE_LINE.findall(body)]
        body = _INCLUDE_LINE.sub("", body)
        parts.append(f'namespace qch_part{i} {{\n#line 1 "kernel{i}"\n{body}\n}}\n')
        kernels += [(f"qch_part{i}", k) for k in found]
    names = [k.name for _, k in kernels]
    if len(set(names)) != len(names):
        raise ValueError(f"kernel names repeat across the sources: {sorted(names)}")
    head = "".join(dict.fromkeys(includes))
    return head + "".join(parts) + _trailer(kernels), [k for _, k in kernels]


_loaded: dict[str, "Module"] = {}


def build(source: str | Sequence[str], dialect: str, defines: dict | None = None,
          simd_width: int = 32) -> "Module":
    """Compile (or fetch from the cache) and load one source, or several compiled together.
    `defines` set harness knobs such as QCH_TIMEOUT_S (seconds before a stuck barrier fails
    the launch). `simd_width`: lanes per warp / SIMD group, a power of two from 4 to 64; CUDA
    warps are always 32, Metal SIMD groups are 32 on Apple GPUs and 8 to 64 on others."""
    if dialect == "cuda" and simd_width != 32:
        raise ValueError(f"CUDA warps are 32 lanes, not {simd_width}")
    tu, kernels = translation_unit([source] if isinstance(source, str) else list(source), dialect)
    defines = dict(defines or {})
    if simd_width != 32:
        defines["QCH_SIMD_WIDTH"] = simd_width
    flags = FLAGS + tuple(f"-D{k}={v}" for k, v in sorted(defines.items()))
    key = hashlib.sha256("\0".join(
        (tu, _prelude_text(), " ".join(flags), _compiler_identity())).encode()).hexdigest()[:32]
    if key in _loaded:
        return _loaded[key]
    so = cache_dir() / f"{dialect}-{key}.so"
    if not so.exists():
        _compile(tu, so, dialect, flags)
    module = Module(ctypes.CDLL(str(so)), kernels, tu)
    _loaded[key] = module
    return module


def _compile(tu: str, so: Path, dialect: str, flags: tuple[str, ...]) -> None:
    # per-process temp names, published with os.replace: concurrent sessions never see half
    # a file; the .cpp stays beside the .so for reading what was compiled
    src = so.with_name(f"{so.stem}.{os.getpid()}.cpp")
    src.write_text(tu)
    tmp = so.with_name(f"{so.name}.{os.getpid()}.tmp")
    proc = subprocess.run([CXX, *flags, "-I", str(INCLUDE), "-x", "c++", str(src), "-o", str(tmp)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        numbered = "\n".join(f"{i:4d} | {l}" for i, l in enumerate(tu.splitlines(), 1))
        raise HarnessError(f"{CXX} could not compile the {dialect} kernel:\n{proc.stderr}\n"
                           f"--- translation unit ---\n{numbered}")
    os.replace(src, so.with_suffix(".cpp"))
    os.replace(tmp, so)


class Module:
    def __init__(self, lib: ctypes.CDLL, kernels: list[KernelInfo], tu: str):
        self.lib = lib
        self.tu = tu
        self.kernels = {k.name: Kernel(lib, k) for k in kernels}

    def kernel(self, name: str) -> "Kernel":
        if name not in self.kernels:
            raise KeyError(f"no kernel {name!r}; the source defines {sorted(self.kernels)}")
        return self.kernels[name]


class Kernel:
    def __init__(self, lib: ctypes.CDLL, info: KernelInfo):
        self.info = info
        self._launch = getattr(lib, f"qch_launch__{info.name}")
        self._launch.restype = ctypes.c_int
        self._launch.argtypes = [ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint),
                                 ctypes.POINTER(ctypes.c_void_p), ctypes.c_ulong, ctypes.c_int,
                                 ctypes.c_char_p, ctypes.c_ulong]
        describe = getattr(lib, f"qch_describe__{info.name}")
        desc = (ctypes.c_int * 2048)()   # shaped elements: one parameter per component
        count = describe(desc, 2048)
        if count < 0:
            raise TypeError(f"kernel {info.name} has more than 1024 parameters (the harness's limit)")
        # (kind, size of the value, or of the pointee for pointers) per parameter
        self.params = [(_KIND[desc[2 * i]], desc[2 * i + 1]) for i in range(count)]

    def launch(self, grid, block, args: Sequence, shared_bytes: int = 0,
               schedule: str = "alternate") -> None:
        """Run the kernel over `grid` blocks of `block` threads (ints or up-to-3 tuples).

        schedule: "alternate" (default: warps run one at a time up to each block barrier,
        ascending in even blocks and descending in odd ones, which makes a missing barrier
        show up deterministically), "ascending", "descending", or "free" (every thread runs
        whenever the OS schedules it)."""
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {sorted(SCHEDULES)}, not {schedule!r}")
        name = self.info.name
        if len(args) != len(self.params):
            raise TypeError(f"kernel {name} takes {len(self.params)} arguments "
                            f"{[k for k, _ in self.params]}, got {len(args)}")
        keep, ptrs = [], (ctypes.c_void_p * max(1, len(args)))()
        for i, (arg, (kind, size)) in enumerate(zip(args, self.params)):
            holder = _marshal(name, i, arg, kind, size)
            keep.append(holder)
            ptrs[i] = ctypes.cast(ctypes.pointer(holder), ctypes.c_void_p) \
                if isinstance(holder, ctypes.c_void_p) else holder.ctypes.data
        g, b = _dims(grid), _dims(block)
        limit = self.info.max_threads
        if limit is not None and b[0] * b[1] * b[2] > limit:
            raise HarnessError(f"kernel {name}: block {b} exceeds its "
                               f"[[max_total_threads_per_threadgroup({limit})]]")
        if 0 in g:
            return  # an empty grid launches nothing, as on a GPU
        err = ctypes.create_string_buffer(4096)
        rc = self._launch((ctypes.c_uint * 3)(*g), (ctypes.c_uint * 3)(*b), ptrs, shared_bytes,
                          SCHEDULES[schedule], err, len(err))
        if rc:
            raise HarnessError(f"kernel {name} grid={g} block={b}: {err.value.decode()}")


def _dims(d) -> tuple[int, int, int]:
    d = (d,) if isinstance(d, (int, np.integer)) else tuple(d)
    return tuple(int(x) for x in d) + (1,) * (3 - len(d))


def _marshal(kernel: str, i: int, arg, kind: str, size: int):
    """-> an object whose memory holds the argument value (what args[i] points at)."""
    where = f"kernel {kernel} argument {i}"
    if kind == "pointer":
        if not isinstance(arg, np.ndarray) or arg.ndim != 1:
            raise TypeError(f"{where} is a pointer: pass a 1-D numpy array, not {type(arg).__name__}")
        if size and size < arg.itemsize:
            raise TypeError(f"{where} points at {size}-byte elements but the array holds "
                            f"{arg.dtype} ({arg.itemsize} bytes)")
        return ctypes.c_void_p(arg.ctypes.data)  # element 0, also for strided/negative views
    if kind == "reference":
        if not isinstance(arg, (np.generic, np.ndarray)) or np.asarray(arg).itemsize != size:
            raise TypeError(f"{where} is a {size}-byte `constant T&`: pass a numpy scalar of "
                            f"that size, not {arg!r}")
        return np.array(arg).reshape(1)
    dtype = _SCALAR.get((kind, size))
    if dtype is None:
        raise TypeError(f"{where}: {kind} parameters of {size} bytes are not supported by the harness")
    if isinstance(arg, np.generic) and arg.dtype != np.dtype(dtype):
        raise TypeError(f"{where} is {np.dtype(dtype)}, got a numpy {arg.dtype} scalar")
    return np.array(arg, dtype=dtype).reshape(1)
