"""The cpu backend's llvm route: a pass printed as LLVM IR (_codegen/dialects/llvm_ir.py),
compiled with llvmlite (O3, the host CPU) and loaded into an MCJIT engine; its entry points
called through ctypes, which releases the GIL, so the morsel scheduler runs them on the
cores like numba's nogil entry points.

Disk cache (docs/cache.md): the object file is the entry's payload (`disk_cache.obtain`,
keyed by the IR text, llvmlite's LLVM version and the host CPU's name and features); a later
process loads it into a fresh engine in a few ms, with neither numba nor the optimiser.

An `LlvmEntry` is called exactly as the numba dialect's entry point of the same step
(cpu.py's Launch does not know which route it runs): (c0, c1, [nfin,] n, arrays...,
params...) with NumPy arrays and scalars; a reduce entry returns its result values as a tuple.
"""
from __future__ import annotations

import ctypes
import struct
import threading
import time
from functools import lru_cache

import numpy as np

from querycompute._codegen.dialects import llvm_ir
from querycompute._codegen.ir.program import Pass, Reduce

from ...artifacts import ArtifactCache
from ...cache import disk_cache, dump_source
from ...errors import CompileError
from ...locks import KeyedLocks
from ... import after_fork


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether llvmlite (numba's, always installed with it) has the new pass manager this
    route optimises with (llvmlite >= 0.44); an older one leaves every pass to numba."""
    try:
        return hasattr(_llvm(), "create_pass_builder")
    except ImportError:
        return False


@lru_cache(maxsize=1)
def _llvm():
    """llvmlite.binding with the native target initialised (a heavy optional import)."""
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


def _machine():
    """A target machine for this CPU at O3 (an engine owns the one it is given)."""
    llvm = _llvm()
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)


@lru_cache(maxsize=1)
def identity() -> tuple[str, str]:
    """(compiler, device) of the disk-cache key: llvmlite and its LLVM, and the host CPU's
    name and features (the object file is compiled for them)."""
    import llvmlite
    llvm = _llvm()
    compiler = f"llvmlite {llvmlite.__version__} llvm {'.'.join(map(str, llvm.llvm_version_info))}"
    device = f"{llvm.get_default_triple()} {llvm.get_host_cpu_name()} {llvm.get_host_cpu_features().flatten()}"
    return compiler, device


# llvmlite parses every module into LLVM's one global context, which is not thread-safe: a
# compile or a load holds this lock (as numba's compiler holds its own), and a fork waits for
# it, so no child starts with LLVM mid-compile
_LLVM_LOCK = threading.RLock()
after_fork.hold(_LLVM_LOCK, rank=1)


def compile_object(text: str) -> bytes:
    """The IR module `text`, verified, optimised at O3 (loop and SLP vectorisation on; no
    fast-math flag exists in the IR, so no add is regrouped) and emitted as an object file."""
    with _LLVM_LOCK:
        return _compile(text)


def _compile(text: str) -> bytes:
    llvm = _llvm()
    mod = llvm.parse_assembly(text)
    mod.verify()
    tm = _machine()
    tuning = llvm.PipelineTuningOptions(speed_level=3)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, tuning)
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_object(mod)


class LlvmModule:
    """An object file loaded into its own MCJIT engine (kept alive with this object)."""

    def __init__(self, obj: bytes):
        llvm = _llvm()
        with _LLVM_LOCK:
            self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _machine())
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self.engine.finalize_object()

    def address(self, name: str) -> int:
        with _LLVM_LOCK:
            addr = self.engine.get_function_address(name)
        if not addr:
            raise CompileError("llvm", f"entry point {name} is missing from the object file", "", ())
        return addr


class _Stats:
    cache_misses: dict = {}


# struct codes of one 8-byte slot of an entry point's head (params) and results (llvm_ir's unpack)
_SLOT = {"bool": "?7x", "int8": "b7x", "int16": "h6x", "int32": "i4x", "int64": "q",
         "uint8": "B7x", "uint16": "H6x", "uint32": "I4x", "uint64": "Q", "float32": "f4x",
         "float64": "d"}


class LlvmEntry:
    """One entry point, called like the numba dialect's (module doc). `overloads` and
    `stats` answer cpu.py's Launch as a numba dispatcher would: one specialisation, which never
    changes (a new input layout is made contiguous by the caller, never compiled)."""

    stats = _Stats()

    def __init__(self, module: LlvmModule, name: str, scalars: int, arrays: int,
                 params: tuple, results: tuple = ()):
        self.module = module                      # keeps the engine (the code) alive
        self.overloads = {"native": name}
        # one py_object argument, the tuple llvm_ir's `unpack` reads: the integers and params
        # packed in a bytes object (struct: ~0.1 us), a bytearray for the results, the arrays
        self.fn = ctypes.CFUNCTYPE(None, ctypes.py_object)(module.address(name))
        self.scalars, self.arrays = scalars, arrays
        self.pack = struct.Struct("<" + "q" * scalars + "".join(_SLOT[d] for d in params)).pack
        self.results = struct.Struct("<" + "".join(_SLOT[d] for d in results)) if results else None

    def __call__(self, *args):
        s, a = self.scalars, self.arrays
        arrays = args[s:s + a]
        for x in arrays:
            if not x.flags.c_contiguous:
                raise ValueError("the llvm route's entry points take contiguous arrays")
        head = self.pack(*args[:s], *args[s + a:])
        if self.results is None:
            self.fn((head, *arrays))
            return None
        out = bytearray(self.results.size)
        self.fn((head, out, *arrays))
        return self.results.unpack(out)


def layout() -> tuple[int, int, int, int]:
    """Where the objects of an entry point's argument keep their data (llvm_ir's `unpack`):
    the byte offsets of a tuple's first item, a bytes object's characters, a bytearray's
    start pointer and a NumPy array's data pointer in those objects. Measured on live
    objects, so a CPython with another object header is found, not assumed."""
    x = np.arange(4, dtype=np.int64)
    raw, buf = b"querycompute-llvm", bytearray(b"querycompute-llvm")
    start = ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))

    def find(obj, test) -> int:
        for off in range(8, 65, 8):
            if test(id(obj) + off):
                return off
        raise RuntimeError(f"cannot find where a {type(obj).__name__} object keeps its data")

    pointer = lambda at: ctypes.c_void_p.from_address(at).value      # noqa: E731
    return (find((x,), lambda at: pointer(at) == id(x)),
            find(raw, lambda at: ctypes.string_at(at, len(raw)) == raw),
            find(buf, lambda at: pointer(at) == start),
            find(x, lambda at: pointer(at) == x.ctypes.data))


def namespace(p: Pass, module: LlvmModule) -> dict:
    """The names cpu.py's Launch reads from a pass's module (numba_py's module doc), bound
    to this route's entry points."""
    prog = p.program
    ins, params = len(prog.inputs), tuple(s.dtype for s in prog.params)
    name = p.name
    if isinstance(p.terminal, Reduce):
        parts = llvm_ir.partial_dtypes(p)
        return {f"{name}_chunks": LlvmEntry(module, f"{name}_chunks", 4, len(parts) + ins, params,
                                            llvm_ir.result_dtypes(p)),
                f"{name}_PARTIALS": tuple(np.dtype(d).type for d in parts),
                f"{name}_ONE_CHUNK": False, f"{name}_CONTIGUOUS": True, "DIALECT": llvm_ir.NAME}
    outs = len(prog.outputs)
    if p.stage_op == "compact":
        return {f"{name}_count": LlvmEntry(module, f"{name}_count", 4, 2 + ins, params),
                f"{name}_write": LlvmEntry(module, f"{name}_write", 3, 1 + outs + ins, params),
                f"{name}_write_sparse": LlvmEntry(module, f"{name}_write_sparse", 3, 2 + outs + ins, params),
                f"{name}_CONTIGUOUS": True, "DIALECT": llvm_ir.NAME}
    return {f"{name}_chunks": LlvmEntry(module, f"{name}_chunks", 3, outs + ins, params),
            f"{name}_CONTIGUOUS": True, "DIALECT": llvm_ir.NAME}


def _use(obj: bytes):
    """A cached object file loaded, or None (rebuilt and rewritten) where LLVM refuses it."""
    try:
        return LlvmModule(obj)
    except Exception:
        return None


def source(p: Pass) -> str:
    """Pass p's IR text, printed once per pass (a disk-cache lookup and the load that
    follows it ask twice)."""
    return _sources.get_or_make(p, lambda: llvm_ir.render(p, _layout()))


_sources = ArtifactCache("cpu: llvm IR texts", 256)      # Pass -> its IR text


@lru_cache(maxsize=1)
def _layout() -> tuple[int, int, int, int]:
    return layout()


_modules = ArtifactCache("cpu: llvm modules")      # IR text -> its LlvmModule (artifacts.py)
_loading = KeyedLocks()
after_fork.register(_loading.after_fork)


def _key(text: str):
    compiler, device = identity()
    return disk_cache.make_key(backend="cpu", compiler=compiler, device=device,
                               options=("O3", "llvm_ir"), source=text)


def cached(p: Pass) -> bool:
    """Whether pass p's object file is in memory or in the disk cache (its IR printed and
    keyed, the entry's completion marker looked up: a few ms, no compile)."""
    try:
        text = source(p)
    except Exception:
        return False
    return _modules.get(text) is not None or disk_cache.stamp(_key(text)) is not None


def load(p: Pass) -> tuple[dict, object, str, float]:
    """(namespace, cache key, origin, ms) of pass p on the llvm route: memory, the disk
    cache's object file, or compiled now (and stored)."""
    try:
        text = source(p)
    except Exception as exc:              # a node the printer cannot spell for these types
        raise CompileError("llvm", f"{type(exc).__name__}: {exc}", repr(p), ("O3",)) from exc
    hit = _modules.get(text)
    if hit is not None:
        return namespace(p, hit[0]), hit[1], "memory", 0.0
    with _loading.hold(text):
        hit = _modules.get(text)
        if hit is not None:
            return namespace(p, hit[0]), hit[1], "memory", 0.0
        t0 = time.perf_counter()
        key = _key(text)

        def compile_fn():
            dump_source(p.name, "llvm", text)
            try:
                obj = compile_object(text)
            except Exception as exc:      # an IR the printer got wrong: show it
                raise CompileError("llvm", f"{type(exc).__name__}: {exc}", text, ("O3",)) from exc
            return obj, LlvmModule(obj)

        module, origin, _ = disk_cache.obtain(key, compile_fn, _use, source_suffix=".ll",
                                              kernel_names=[p.name],
                                              dtypes=[s.dtype for s in p.program.inputs])
        _modules.put(text, (module, key))
        return namespace(p, module), key, origin, (time.perf_counter() - t0) * 1e3
