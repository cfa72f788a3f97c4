"""The `cpu` backend: runs a fused pass as numba-compiled Python (dialect "numba").

codegen.dialects.numba_py prints the pass as a Python module; here it is executed into a
fresh namespace, its serial entry is compiled at once (so `prepare` reports the compile
time), and each call picks the serial entry for small n (starting numba's thread pool costs
tens of microseconds) or the parallel one. Both entries compute the same chunks in the same
order, so the choice never changes a result's bits.
"""
from __future__ import annotations

import linecache
import threading
import time
from typing import Any, Sequence

import numpy as np

from codegen.dialects import numba_py, numba_py_runtime
from codegen.program import Pass, Reduce

from ..errors import CompileError
from .base import Backend, KernelRun, Prepared, Trace

# Below this many elements the serial entry runs: one chunk's worth of work is cheaper than
# waking the thread pool.
SERIAL_MAX = 32768

# numba's fallback "workqueue" threading layer aborts when two Python threads launch
# parallel kernels at once; serialising parallel launches costs ~0.1 us and is always safe.
_PARALLEL_LOCK = threading.Lock()

_modules: dict[Pass, dict] = {}       # Pass -> executed namespace (its dispatchers keep
                                      # every specialisation numba compiled for it)


def _numba():
    import numba
    return numba


def _load(p: Pass) -> tuple[dict, str, float]:
    """(namespace, source, compile ms) for pass p, from the memory dict or freshly built."""
    ns = _modules.get(p)
    if ns is not None:
        return ns, ns["__qc_source__"], 0.0
    src = numba_py.render(p)
    filename = f"<querycompute-cpu:{p.name}:{len(_modules)}>"
    # register the text so numba's error messages and tracebacks can quote the lines
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = numba_py_runtime.namespace()
    ns.update(__name__="querycompute_cpu_kernel", __qc_source__=src)
    t0 = time.perf_counter()
    try:
        exec(compile(src, filename, "exec"), ns)
        _compile_serial(p, ns)
    except Exception as exc:  # numba typing/lowering errors: show the source we generated
        raise CompileError("numba", f"{type(exc).__name__}: {exc}", src,
                           ('error_model="numpy"', "fastmath=False")) from exc
    compile_ms = (time.perf_counter() - t0) * 1e3
    _modules[p] = ns
    return ns, src, compile_ms


def _compile_serial(p: Pass, ns: dict) -> None:
    """Compile the serial entry points for contiguous arrays by running them on n = 0."""
    prog = p.program
    inputs = [np.empty(0, numba_py.storage_dtype(s.dtype)) for s in prog.inputs]
    params = [np.dtype(_param_type(s.dtype)).type(0) for s in prog.params]
    _Launch(p, ns, False)(0, inputs, params)


def _param_type(dtype: str) -> str:
    return "float32" if dtype == "float16" else dtype     # float16 is held in float32


class _Launch:
    """Calls one flavour (serial or parallel) of a pass's entry points: n, inputs and
    params in, the raw tuple out (outputs in storage dtypes)."""

    def __init__(self, p: Pass, ns: dict, parallel: bool):
        kind = "parallel" if parallel else "serial"
        name = p.name
        self.storage = [np.dtype(numba_py.storage_dtype(d)) for d in p.program.output_dtypes]
        if isinstance(p.terminal, Reduce):
            self.entry = ns[f"{name}_{kind}"]
            self.shape = "reduce"
        elif p.program.has_filter:
            self.count, self.write = ns[f"{name}_count_{kind}"], ns[f"{name}_write_{kind}"]
            self.shape = "compact"
        else:
            self.entry = ns[f"{name}_{kind}"]
            self.shape = "dense"

    def __call__(self, n, inputs, params):
        if self.shape == "reduce":
            return self.entry(n, *inputs, *params)
        if self.shape == "dense":
            outs = tuple(np.empty(n, dt) for dt in self.storage)
            self.entry(n, *outs, *inputs, *params)
            return outs
        offsets = self.count(n, *inputs, *params)
        outs = tuple(np.empty(int(offsets[-1]), dt) for dt in self.storage)
        self.write(n, offsets, *outs, *inputs, *params)
        return outs


class CpuPrepared(Prepared):
    """One pass, compiled; `run` converts float16 storage and picks serial or parallel."""

    def __init__(self, p: Pass, ns: dict, compile_ms: float):
        self.p = p
        self.origin = "compiled" if compile_ms else "memory"
        self.compile_ms = compile_ms
        self._serial = _Launch(p, ns, False)
        self._parallel = _Launch(p, ns, True)
        prog = p.program
        self._f16_inputs = tuple(k for k, s in enumerate(prog.inputs) if s.dtype == "float16")
        # the scalar type each param must arrive as (float16 params travel as float32)
        self._param_types = tuple(np.dtype(_param_type(s.dtype)).type for s in prog.params)
        self._f16_outputs = tuple(k for k, d in enumerate(prog.output_dtypes) if d == "float16")
        self._reduce = p.terminal.aggs if isinstance(p.terminal, Reduce) else None
        self._runs = 0

    def run(self, inputs: Sequence[Any], params: Sequence[Any], n: int, trace: Trace) -> Any:
        t0 = time.perf_counter()
        if self._f16_inputs:      # numba has no CPU float16: pass the bits (a view, no copy)
            inputs = list(inputs)
            for k in self._f16_inputs:
                inputs[k] = np.asarray(inputs[k]).view(np.uint16)
        for k, t in enumerate(self._param_types):
            if type(params[k]) is not t:   # a Python number would compile a float64/int64
                params = [pt(v) for pt, v in zip(self._param_types, params)]   # variant
                break
        parallel = n >= SERIAL_MAX
        if parallel:
            with _PARALLEL_LOCK:
                raw = self._parallel(n, inputs, params)
        else:
            raw = self._serial(n, inputs, params)
        result = self._results(raw)
        run_ms = (time.perf_counter() - t0) * 1e3
        self._runs += 1
        trace.kernels.append(KernelRun(
            name=f"{self.p.name}_{'parallel' if parallel else 'serial'}", dialect="numba",
            grid=(max(1, -(-n // numba_py.CHUNK)),), block=(numba_py.CHUNK,),
            cache=self.origin if self._runs == 1 else "memory",
            compile_ms=self.compile_ms if self._runs == 1 else 0.0, run_ms=run_ms))
        return result

    def _results(self, raw):
        if self._reduce is None:
            if not self._f16_outputs:
                return raw
            out = list(raw)
            for k in self._f16_outputs:
                out[k] = out[k].view(np.float16)
            return tuple(out)
        results, j = [], 0
        for agg in self._reduce:
            if agg.op == "first":
                idx = int(raw[j])
                vals = tuple(np.dtype(v.dtype).type(x)
                             for v, x in zip(agg.values, raw[j + 1:j + 1 + len(agg.values)]))
                results.append((idx, vals if idx >= 0 else ()))
            elif agg.op == "count":
                results.append(int(raw[j]))
            elif agg.op in ("any", "all"):
                results.append(bool(raw[j]))
            else:
                results.append(np.dtype(agg.dtype).type(raw[j]))
            j += numba_py.result_slots(agg)
        return results


class CpuBackend(Backend):
    name = "cpu"
    dialect = "numba"

    def __init__(self):
        self._available: tuple[bool, str] | None = None

    def availability(self) -> tuple[bool, str]:
        if self._available is None:
            try:
                numba = _numba()
                self._available = (True, f"numba {numba.__version__} (LLVM JIT on this CPU)")
            except ImportError as exc:
                self._available = (False, f"numba is not importable ({exc}); "
                                          f"install it with: pip install numba")
        return self._available

    def source(self, p: Pass) -> str:
        return numba_py.render(p)

    def launch_shape(self, p: Pass, n: int) -> list[dict]:
        chunks = max(1, -(-n // numba_py.CHUNK))
        kind = "parallel" if n >= SERIAL_MAX else "serial"
        return [{"name": f"{p.name}_{kind}", "grid": (chunks,), "block": (numba_py.CHUNK,)}]

    def prepare(self, p: Pass) -> Prepared:
        ns, _src, compile_ms = _load(p)
        return CpuPrepared(p, ns, compile_ms)
