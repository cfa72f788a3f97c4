"""The numba dialect: prints one Pass as a self-contained Python module numba compiles.

The module is `exec`uted in the namespace numba_py_runtime.namespace() returns (numpy,
math, numba's njit/prange, two bit-cast intrinsics). It defines, in this order:

  helpers            scalar functions with NumPy's exact semantics (numba_py_helpers)
  <name>_element     element i of the chain -> (keep, values...), fastmath off
  <name>_fold<k>     (fold aggs only) the user's combine function
  <name>_chunk       (Reduce only) partial accumulators of elements [lo, hi)
  entry points, each in a `_serial` (plain loops, for small n: no thread pool) and a
  `_parallel` (prange over chunks) flavour, taking (n, ..., inputs..., params...):
    Reduce             <name>_serial(n, ...) -> the flat results of `result_slots`
    ToArray, no filter <name>_serial(n, out0, out1.., ...) fills the caller's outputs
    ToArray, filter    <name>_count_serial(n, ...) -> offsets (int64, nchunks + 1), then
                       <name>_write_serial(n, offsets, out0.., ...) with outputs of offsets[-1]
Output arrays hold `storage_dtype` elements (float16 as its uint16 bits); so do inputs.
Chunks are CHUNK elements whatever the thread count, and partials are combined in chunk
order, so a result's bits depend only on the input. Float sums vectorise because only the
chunk function carries numba's `reassoc` flag (and only its accumulating adds are float
ops); the element function is compiled with fastmath explicitly off, so its arithmetic,
even once inlined, keeps strict IEEE semantics.
"""
from __future__ import annotations

from ..program import Agg, Filter, Let, Pass, Reduce, ToArray
from .numba_py_expr import ExprPrinter
from .numba_py_helpers import helper_source, jit_decorator
from .numba_py_reduce import ReducePrinter

CHUNK = 1 << 16                       # elements per chunk (fixed: results don't depend on threads)


def storage_dtype(dtype: str) -> str:
    """Element type of the arrays the kernels see: float16 travels as its uint16 bits
    (numba has no CPU float16), everything else as itself."""
    return "uint16" if dtype == "float16" else dtype


def result_slots(agg: Agg) -> int:
    """How many entries of a Reduce entry's result tuple belong to `agg`."""
    return 1 + len(agg.values) if agg.op == "first" else 1


def _describe(t) -> str:
    if isinstance(t, ToArray):
        return "to_array"
    return "reduce " + ", ".join(f"{a.op}:{a.dtype}" for a in t.aggs)


def render(p: Pass, cache: bool = False) -> str:
    """The module source for pass `p`; `cache=True` switches numba's on-disk cache on for
    every function (for a module imported from a file, as the cpu backend does)."""
    return _ModulePrinter(p, cache).render()


class _ModulePrinter:
    def __init__(self, p: Pass, cache: bool):
        if not p.name.isidentifier():
            raise ValueError(f"Pass.name {p.name!r} is not a valid identifier")
        self.p = p
        self.prog = p.program
        self.helpers: set = set()
        self.cache = cache
        # decorators: "scalar" (helpers, element, fold), "chunk" (reduce partials, with the
        # reassociation that vectorises float sums), "serial" and "parallel" entry points
        self.jits = {"scalar": jit_decorator(cache), "serial": jit_decorator(cache),
                     "chunk": jit_decorator(cache, fastmath='{"reassoc"}'),
                     "parallel": jit_decorator(cache, parallel=True)}
        ins = [f"in_{s.name}" for s in self.prog.inputs]
        # inputs then params: every kernel function takes them after its own arguments
        self.args = ", ".join(ins + [f"p_{s.name}" for s in self.prog.params])

    def _a(self, first: str) -> str:
        return ", ".join(x for x in (first, self.args) if x)

    def render(self) -> str:
        if isinstance(self.p.terminal, ToArray):
            element = self._element(None)
            kernels = self._to_array()
        elif isinstance(self.p.terminal, Reduce):
            reduce = ReducePrinter(self.p, self._element_name(), self.args,
                                   self.helpers, self.jits)
            element = self._element(reduce)
            kernels = reduce.render()
        else:
            raise TypeError(f"unknown terminal {type(self.p.terminal).__name__}")
        helpers = [helper_source(kind, ft, self.cache) for kind, ft in sorted(self.helpers, key=str)]
        return "\n\n\n".join([self._header()] + helpers + [element] + kernels) + "\n"

    def _header(self) -> str:
        prog = self.prog
        ins = ", ".join(f"{s.name}: {s.dtype}" for s in prog.inputs) or "none (index only)"
        params = ", ".join(f"{s.name}: {s.dtype}" for s in prog.params) or "none"
        return (f'"""querycompute cpu kernels for pass {self.p.name!r} '
                f'(dialect numba, generated).\n\n'
                f"inputs: {ins}\nparams: {params}\n"
                f"terminal: {_describe(self.p.terminal)}\n"
                f'Globals come from querycompute._codegen.dialects.numba_py_runtime.namespace().\n"""\n'
                f"CHUNK = {CHUNK}")

    def _element_name(self) -> str:
        return f"{self.p.name}_element"

    # ---- element function ----------------------------------------------------------------
    def _element(self, reduce: ReducePrinter | None) -> str:
        """def <name>_element(i, inputs..., params...) -> (keep, values...).

        Filters don't branch: every statement is computed for every element (expressions
        are pure and never trap), and `keep` is the conjunction of the filters, so the
        caller's loop stays a straight line LLVM can vectorise."""
        prog = self.prog

        def load(k: int) -> str:
            spec = prog.inputs[k]
            text = f"in_{spec.name}[i]"
            if spec.dtype == "float16":
                self.helpers.add(("f16_decode", None))
                return f"_f16_decode({text})"
            return text

        ep = ExprPrinter(load, lambda name: f"p_{name}", "i", self.helpers)
        keep_terms = []
        for stmt in prog.body:
            if isinstance(stmt, Let):
                ep.define(stmt.name, stmt.expr)
            elif isinstance(stmt, Filter):
                keep_terms.append(ep.value(stmt.cond))
            else:
                raise TypeError(f"unknown statement {type(stmt).__name__} in program body")
        values = [ep.value(e) for e in self._element_values()]
        keep = " & ".join(f"({t})" for t in keep_terms) or "True"
        ep.lines.append(f"keep = {keep}")
        if reduce is None:
            values = [self._to_storage(v, e.dtype) for v, e in zip(values, prog.outputs)]
        else:
            values = reduce.element_returns(values, ep.lines)
        ret = ", ".join(["keep"] + values)
        return (f"{self.jits['scalar']}\n"
                f"def {self._element_name()}({self._a('i')}):\n"
                f'    """Element i: (keep, values...); i is unsigned so loads skip '
                f'negative-index fix-ups."""\n'
                + "".join(f"    {line}\n" for line in ep.lines) +
                f"    return ({ret},)")

    def _element_values(self):
        if isinstance(self.p.terminal, ToArray):
            return self.prog.outputs
        return [v for agg in self.p.terminal.aggs for v in agg.values]

    def _to_storage(self, name: str, dtype: str) -> str:
        if dtype == "float16":
            self.helpers.add(("f16_encode", None))
            return f"_f16_encode({name})"
        return name

    # ---- ToArray -------------------------------------------------------------------------
    # Output arrays are allocated by the caller (NumPy asks the kernel for huge pages on big
    # arrays, which makes first-touch page faults far cheaper than numba's own allocation).
    def _to_array(self) -> list[str]:
        outs = [f"out{k}" for k in range(len(self.prog.outputs))]
        elems = [f"e{k}" for k in range(len(outs))]
        call = f"{self._element_name()}({self._a('np.uint64(i)')})"
        unpack = ", ".join(["keep"] + elems)
        out_args = ", ".join(outs)
        if not self.prog.has_filter:
            def dense(loop: str) -> str:
                stores = "".join(f"        {o}[i] = {e}\n" for o, e in zip(outs, elems))
                return (f"{self.jits[loop]}\n"
                        f"def {self.p.name}_{loop}({self._a('n, ' + out_args)}):\n"
                        f'    """No filter: element i is stored at index i of every output."""\n'
                        f"    for i in {'prange' if loop == 'parallel' else 'range'}(n):\n"
                        f"        {unpack} = {call}\n"
                        f"{stores}").rstrip("\n")
            return [dense("serial"), dense("parallel")]

        def count(loop: str) -> str:
            rng = "prange" if loop == "parallel" else "range"
            return (f"{self.jits[loop]}\n"
                    f"def {self.p.name}_count_{loop}({self._a('n')}):\n"
                    f'    """Compaction pass 1: survivors per fixed chunk, prefix-summed, so\n'
                    f"    offsets[c] is where chunk c's first survivor goes and offsets[-1]\n"
                    f'    is the total."""\n'
                    f"    nch = (n + CHUNK - 1) // CHUNK\n"
                    f"    offsets = np.zeros(nch + 1, np.int64)\n"
                    f"    for c in {rng}(nch):\n"
                    f"        cnt = np.int64(0)\n"
                    f"        for i in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):\n"
                    f"            {unpack} = {call}\n"
                    f"            cnt += np.int64(keep)\n"
                    f"        offsets[c + 1] = cnt\n"
                    f"    for c in range(nch):\n"
                    f"        offsets[c + 1] += offsets[c]\n"
                    f"    return offsets")

        def write(loop: str) -> str:
            rng = "prange" if loop == "parallel" else "range"
            stores = "".join(f"                {o}[np.uint64(pos)] = {e}\n"
                             for o, e in zip(outs, elems))
            return (f"{self.jits[loop]}\n"
                    f"def {self.p.name}_write_{loop}({self._a('n, offsets, ' + out_args)}):\n"
                    f'    """Compaction pass 2: each chunk writes its survivors, in source\n'
                    f"    order, from its offset; chunks never overlap, so order is kept.\n"
                    f"    Every element is stored at the next free slot and only a survivor\n"
                    f"    moves it on (a dropped one is overwritten by the next survivor):\n"
                    f"    no branch on `keep`, which mispredicts on real data. The only branch\n"
                    f"    stops the stores after the chunk's last survivor, so a chunk never\n"
                    f'    writes into the next one\'s slots."""\n'
                    f"    nch = (n + CHUNK - 1) // CHUNK\n"
                    f"    for c in {rng}(nch):\n"
                    f"        pos = offsets[c]\n"
                    f"        end = offsets[c + 1]\n"
                    f"        for i in range(c * CHUNK, min(n, c * CHUNK + CHUNK)):\n"
                    f"            {unpack} = {call}\n"
                    f"            if pos < end:\n"
                    f"{stores}"
                    f"            pos += np.int64(keep)").rstrip("\n")
        return [count("serial"), write("serial"), count("parallel"), write("parallel")]
