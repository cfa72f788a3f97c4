"""The cpu backend's numba-free load of cached numba code: a disk-cache hit of a numba module
(numba_loader.load with native=True: the generic kernels, a group_by's modules) loads the
machine code numba compiled with llvmlite and numba's three C extensions, without importing
the numba package (~75-95 ms, plus its cache machinery), and calls it exactly as numba's
dispatcher would: through the cpython wrapper numba compiled, as a `_dynfunc` function object
bound to its environment.

What the object code of a nopython function needs (its undefined symbols) is the Python C API,
libc's memset/memcpy, and functions of numba's C extensions, loaded here by file path without
the package (`_runtime`): `_helperlib` and `_dynfunc` (symbols `numba_<name>`, as
numba.core.base installs them), `core/runtime/_nrt_python` (`NRT_<name>`, as
numba.core.runtime.nrt does; the NRT's memory system is set up when that extension loads;
NRT_incref / decref are compiled into each object). These are the same shared objects numba
loads later if it is imported (a fallback, or a compile): one NRT for both.

The payload (`capture`, written beside numba's files in the entry: cache/modules.py
`store_native`) is our own format, no pickle: a JSON head (the module's plain constants, and
per function each specialisation's argument fingerprint, wrapper and environment names and
their constants, which are only NumPy dtypes) followed by the object files. A call takes the
specialisation whose fingerprint equals that of its arguments (`fingerprint`: the same
function numba's typeof is, for the types recorded; anything else has none); an exact match
is the overload numba's dispatcher would pick. Anything the route cannot provide -- a symbol,
a constant, an argument type, a name of the module that is not a plain constant -- falls back
to numba's own load (numba_loader: per entry when loading, per call when calling).
"""
from __future__ import annotations

import builtins
import ctypes
import glob
import importlib.util
import json
import os
import pickle
import struct
import sys
import types

import numpy as np

from ...cache.modules import elf_undefined
from .llvm_loader import _LLVM_LOCK, _llvm, _machine

MAGIC = b"QCNATIVE1\n"

# ---- argument fingerprints -----------------------------------------------------------------
# numba's typeof of an argument, spelled as a string; None where the route does not know the
# type (numba's dispatcher then decides). `of_type` spells numba types (when capturing), `of`
# Python values (when calling): an equal string means numba types the value as that type.

_SCALARS = {"bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
            "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
            "float32": "float32", "float64": "float64", "complex64": "complex64",
            "complex128": "complex128"}


def of_type(ty) -> str | None:
    """The fingerprint of numba type `ty` (numba is imported by the caller), or None."""
    name = type(ty).__name__
    if name == "Array":
        dt = _SCALARS.get(str(ty.dtype))
        if dt is None:
            return None
        return f"a{dt}:{ty.ndim}{ty.layout}{'r' if not ty.mutable else 'w'}{'a' if ty.aligned else 'u'}"
    if name in ("Integer", "Float", "Boolean", "Complex"):
        return _SCALARS.get(str(ty))
    if name in ("UniTuple", "Tuple"):
        parts = [of_type(t) for t in ty.types]
        return None if None in parts else "(" + ",".join(parts) + ")"
    if name == "NoneType":
        return "none"
    return None


_SCALAR_TYPES = {np.dtype(name).type: fp for name, fp in _SCALARS.items()}
_ARRAYS: dict = {}          # (dtype, ndim, flags) -> an array's fingerprint (dtype.name is slow)


def _array(value) -> str | None:
    key = (value.dtype, value.ndim, value.flags.num)
    try:
        return _ARRAYS[key]
    except KeyError:
        pass
    dt, flags = value.dtype, value.flags
    fp = None
    if dt.isnative and dt.name in _SCALARS and dt.fields is None:
        layout = "C" if flags.c_contiguous else ("F" if flags.f_contiguous else "A")
        fp = (f"a{dt.name}:{value.ndim}{layout}{'w' if flags.writeable else 'r'}"
              f"{'a' if flags.aligned else 'u'}")
    _ARRAYS[key] = fp
    return fp


_INT64 = 1 << 63


def of(value) -> str | None:
    """The fingerprint of numba's typeof(value), or None for a type this route leaves to numba."""
    t = type(value)
    if t is np.ndarray:
        return _array(value)
    if t is int:
        if -_INT64 <= value < _INT64:
            return "int64"
        return "uint64" if 0 <= value < 2 * _INT64 else None
    if t is bool:
        return "bool"
    if t is float:
        return "float64"
    fp = _SCALAR_TYPES.get(t)
    if fp is not None:
        return fp
    if t is complex:
        return "complex128"
    if t is tuple:
        parts = [of(v) for v in value]
        return None if None in parts else "(" + ",".join(parts) + ")"
    if value is None:
        return "none"
    return None


def fingerprint(args) -> str | None:
    """`of` of every argument joined (None if one has none); arrays and ints inline, the
    per-call cost of this route's dispatch (~0.3 us an argument)."""
    parts = []
    for v in args:
        t = type(v)
        if t is np.ndarray:
            fp = _ARRAYS.get((v.dtype, v.ndim, v.flags.num)) or _array(v)
        elif t is int and -_INT64 <= v < _INT64:
            fp = "int64"
        else:
            fp = of(v)
        if fp is None:
            return None
        parts.append(fp)
    return ";".join(parts)


# ---- the module's plain constants ------------------------------------------------------------

def _encode_const(v):
    t = type(v)
    if v is None or t in (bool, int, float, str):
        return ["v", v]
    if isinstance(v, np.generic) and v.dtype.name in _SCALARS and v.dtype.kind != "c":
        return ["np", v.dtype.name, v.item()]
    if t is tuple:
        items = [_encode_const(x) for x in v]
        return None if None in items else ["t", items]
    return None


def _decode_const(c):
    kind = c[0]
    if kind == "v":
        return c[1]
    if kind == "np":
        return np.dtype(c[1]).type(c[2])
    return tuple(_decode_const(x) for x in c[1])


def _encode_dtype(d) -> str | None:
    return d.str if isinstance(d, np.dtype) and d.fields is None and d.kind in "biufc" else None


# ---- capture: numba's cached specialisations in our format -------------------------------------

def _signature(args) -> str | None:
    """The fingerprint of a specialisation's argument types."""
    parts = [of_type(a) for a in args]
    return None if None in parts else ";".join(parts)


def _own_functions(namespace: dict):
    """(name, dispatcher) of the numba functions the module of `namespace` defines (not
    another module's that it imported: USES_KERNELS)."""
    for name, value in namespace.items():
        if (not name.startswith("__") and hasattr(value, "py_func") and hasattr(value, "overloads")
                and getattr(value.py_func, "__globals__", None) is namespace):
            yield name, value


def loaded_index(namespace: dict) -> set:
    """"function|fingerprint" of the specialisations numba holds in this process for the
    module's own functions (those the route could call)."""
    return {f"{name}|{fp}" for name, d in _own_functions(namespace)
            for fp in map(_signature, list(d.overloads)) if fp is not None}


def capture(namespace: dict, specialisations) -> tuple[bytes, list] | None:
    """(payload, index) of a numba module's namespace: its plain constants and every cached
    specialisation of its own functions that this route can call; `specialisations(dispatcher)`
    yields numba's cached (argument types, magic tuple, object file, fndesc, environment,
    referenced environments) (cache/modules.py reads numba's files). The index lists
    "function|fingerprint" of what the payload holds. None: nothing to call natively."""
    consts, functions, blobs, offset, index = {}, {}, [], 0, []
    for name, value in _own_functions(namespace):
        specs = []
        for args, magic, obj, fndesc, env, refenvs in specialisations(value):
            fp = _signature(args)
            if fp is None:
                continue
            envs = [[fndesc.env_name, [_encode_dtype(d) for d in env.consts]]]
            envs += [[e.env_name, [_encode_dtype(d) for d in e.consts]] for e in refenvs]
            if any(None in c for _n, c in envs):
                continue
            specs.append({"fp": fp, "magic": list(magic), "wrapper": fndesc.llvm_cpython_wrapper_name,
                          "modname": fndesc.modname, "qualname": fndesc.qualname,
                          "env": fndesc.env_name, "envs": envs, "offset": offset, "size": len(obj)})
            blobs.append(bytes(obj))
            offset += len(obj)
            index.append(f"{name}|{fp}")
        functions[name] = specs
    for name, value in namespace.items():
        if not name.startswith("__") and not callable(value) and not isinstance(value, types.ModuleType):
            c = _encode_const(value)
            if c is not None:
                consts[name] = c
    if not index:
        return None
    head = json.dumps({"consts": consts, "functions": functions}).encode()
    return MAGIC + struct.pack("<Q", len(head)) + head + b"".join(blobs), sorted(index)


def payload_index(data: bytes) -> list | None:
    """The index of a payload (as `capture` returns it), None if it is not one."""
    head = _head(data)
    if head is None:
        return None
    return sorted(f"{n}|{s['fp']}" for n, specs in head["functions"].items() for s in specs)


def _head(data: bytes):
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 8:
        return None
    size, = struct.unpack_from("<Q", data, len(MAGIC))
    start = len(MAGIC) + 8
    try:
        head = json.loads(data[start:start + size])
    except ValueError:
        return None
    head["_base"] = start + size
    return head


# ---- numba's C extensions, without the numba package ------------------------------------------

_runtime: dict = {}


def runtime() -> dict | None:
    """{"dynfunc": numba's _dynfunc module, "magic": (triple, cpu, features)} once numba's C
    extensions are loaded and their functions registered as LLVM symbols (once per process);
    None when they cannot be (numba not installed as expected, or numba's configuration set
    through NUMBA_* variables, which may change what numba would link: its own route then)."""
    if _runtime:
        return _runtime.get("ok")
    with _LLVM_LOCK:          # LLVM's lock (a fork waits for it) guards this route's set-up
        if not _runtime:
            try:
                _runtime["ok"] = _load_runtime()
            except Exception:
                _runtime["ok"] = None
        return _runtime["ok"]


def _extension(base: str, name: str, rel: str):
    """numba's C extension `name` (file `rel` under numba's folder), the one numba itself
    would import (sys.modules shares it with a later `import numba`)."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    paths = glob.glob(os.path.join(base, rel + ".*" + (".pyd" if os.name == "nt" else ".so")))
    if len(paths) != 1:
        raise ImportError(f"numba's {rel} extension not found")
    spec = importlib.util.spec_from_file_location(name, paths[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def _load_runtime() -> dict | None:
    if any(k.startswith("NUMBA_") for k in os.environ) or os.path.exists(".numba_config.yaml"):
        return None
    spec = importlib.util.find_spec("numba")
    if spec is None or not spec.origin:
        return None
    base = os.path.dirname(spec.origin)
    helperlib = _extension(base, "numba._helperlib", "_helperlib")
    dynfunc = _extension(base, "numba._dynfunc", "_dynfunc")
    nrt = _extension(base, "numba.core.runtime._nrt_python", os.path.join("core", "runtime", "_nrt_python"))
    ll = _llvm()
    # the first engine makes the process's own symbols (the Python C API, libc) LLVM's
    engine = ll.create_mcjit_compiler(ll.parse_assembly(""), _machine())
    # what numba.core.base._load_global_helpers and numba.core.runtime.nrt install
    ll.add_symbol("_Py_NoneStruct", id(None))
    for helpers in (helperlib.c_helpers, dynfunc.c_helpers):
        for name, address in helpers.items():
            ll.add_symbol("numba_" + name, address)
    for obj in builtins.__dict__.values():
        if isinstance(obj, type) and issubclass(obj, BaseException):
            ll.add_symbol(f"PyExc_{obj.__name__}", id(obj))
    for name, address in nrt.c_helpers.items():
        ll.add_symbol(name if name.startswith("_") else "NRT_" + name, address)
    # helperlib's numba_unpickle imports numba.core.serialize (the numba package) for its
    # memo of unpickled constants; the code calls it to box a returned array (the array's
    # class, pickled) as well as to raise: the same function without the package
    ll.add_symbol("numba_unpickle", ctypes.cast(_UNPICKLE, ctypes.c_void_p).value)
    magic = [ll.get_process_triple(), ll.get_host_cpu_name(), ll.get_host_cpu_features().flatten()]
    return {"dynfunc": dynfunc, "magic": magic, "ll": ll, "engine": engine}


_unpickled: dict = {}


@ctypes.CFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
def _UNPICKLE(data, n, _hashed):
    """numba.core.serialize._numba_unpickle as helperlib calls it (a new reference to the
    object the code's constant pickles; one object per content, as numba memoises them)."""
    raw = ctypes.string_at(data, n)
    obj = _unpickled.get(raw)
    if obj is None:
        obj = _unpickled[raw] = pickle.loads(raw)
    return obj


def _undefined_ok(obj: bytes, ll) -> bool:
    undefined = elf_undefined(obj)
    return undefined is not None and all(ll.address_of_symbol(n) for n in undefined)


# ---- loading and calling ------------------------------------------------------------------------

class Unavailable(Exception):
    """The route cannot call this (a fallback to numba's load)."""


class NativeModule:
    """A payload's functions, each specialisation loaded on its first call."""

    def __init__(self, data: bytes):
        rt = runtime()
        head = _head(data) if rt is not None else None
        if head is None:
            raise Unavailable("no payload or no runtime")
        self.rt, self.data, self.base = rt, data, head["_base"]
        self.consts = {k: _decode_const(c) for k, c in head["consts"].items()}
        self.functions = head["functions"]
        for specs in self.functions.values():
            for s in specs:
                if s["magic"] != rt["magic"]:
                    raise Unavailable("compiled for another CPU or triple")
        self._cfuncs: dict = {}
        self._envs: dict = {}

    def entry(self, name: str, fallback) -> "NativeEntry | None":
        specs = self.functions.get(name)
        if not specs:
            return None
        return NativeEntry(self, name, {s["fp"]: s for s in specs}, fallback)

    def cfunc(self, name: str, spec: dict):
        """The callable of one specialisation: its object loaded into its own engine, its
        environments filled, the cpython wrapper made a _dynfunc function."""
        key = (name, spec["fp"])
        fn = self._cfuncs.get(key)
        if fn is not None:
            return fn
        with _LLVM_LOCK:
            fn = self._cfuncs.get(key)
            if fn is not None:
                return fn
            ll, dynfunc = self.rt["ll"], self.rt["dynfunc"]
            start = self.base + spec["offset"]
            obj = self.data[start:start + spec["size"]]
            if len(obj) != spec["size"] or not _undefined_ok(obj, ll):
                raise Unavailable(f"{name}: a symbol its code needs is not provided")
            engine = ll.create_mcjit_compiler(ll.parse_assembly(""), _machine())
            engine.add_object_file(ll.ObjectFileRef.from_data(obj))
            engine.finalize_object()
            address = engine.get_function_address(spec["wrapper"])
            slots = {n: engine.get_global_value_address(n) for n, _c in spec["envs"]}
            if not address:
                raise Unavailable(f"{name}: no wrapper in the object")
            env = None
            for env_name, consts in spec["envs"]:
                e = self._env(env_name, spec["modname"], consts)
                if env_name == spec["env"] and env is None:
                    env = e
                if slots[env_name]:
                    # numba's codegen.set_env: the global the code reads holds the address
                    ctypes.c_void_p.from_address(slots[env_name]).value = id(e)
            module = types.ModuleType(spec["modname"])
            fn = dynfunc.make_function(module, spec["qualname"].split(".")[-1],
                                       f"compiled wrapper for {spec['qualname']!r}", address, env,
                                       (engine, tuple(self._envs.values())))
            self._cfuncs[key] = fn
            return fn

    def _env(self, env_name: str, modname: str, consts: list):
        e = self._envs.get(env_name)
        if e is None:
            e = self.rt["dynfunc"].Environment({"__name__": modname})
            e.consts.extend(np.dtype(c) for c in consts)
            self._envs[env_name] = e
        return e


class NativeEntry:
    """One function of a NativeModule, called like numba's dispatcher; arguments it has no
    specialisation for go to `fallback(name)` (numba's dispatcher of the same function)."""

    def __init__(self, module: NativeModule, name: str, specs: dict, fallback):
        self.module, self.name, self.specs, self.fallback = module, name, specs, fallback
        self.__name__ = name
        self._loaded: dict = {}          # fingerprint -> its loaded function

    def __call__(self, *args, **kwargs):
        fp = None if kwargs else fingerprint(args)
        fn = self._loaded.get(fp)
        if fn is not None:
            return fn(*args)
        spec = self.specs.get(fp)
        if spec is not None:
            try:
                fn = self._loaded[fp] = self.module.cfunc(self.name, spec)
            except Unavailable:
                self.specs = {k: v for k, v in self.specs.items() if k != fp}     # numba's, from now
            else:
                return fn(*args)
        return self.fallback(self.name)(*args, **kwargs)

