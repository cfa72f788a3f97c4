"""The numba dialect: prints one Pass as a self-contained Python module numba compiles.

The module is `exec`uted in the namespace numba_py_runtime.namespace() returns (numpy,
math, numba's njit, two bit-cast intrinsics). It defines, in this order:

  helpers            scalar functions with NumPy's exact semantics (numba_py_helpers)
  <name>_element     element i of the chain -> (keep, values...), fastmath off
  the pass's stage op's kernels (querycompute/_codegen/ops/, dispatched on Pass.stage_op),
  its entry points, ONE per step, each over a range of chunks [c0, c1) and without the GIL
  (the cpu backend's morsel scheduler hands ranges to the cores, or runs all chunks in one
  call for a small n: backends/cpu/morsels.py), taking (c0, c1, ..., inputs..., params...):
    reduce             <name>_fold<k> (fold aggs only: the user's combine function),
                       <name>_chunk (partial accumulators of elements [lo, hi)), then
                       <name>_chunks(c0, c1, nfin, n, partials..., ...) -> a flat tuple,
                       ops.reduce.cpu_result_width entries per aggregate, combining the
                       first nfin chunks' partials (module constants <name>_PARTIALS,
                       _ONE_CHUNK, _CONTIGUOUS tell the caller how to call it)
    map                <name>_chunks(c0, c1, n, out0, out1.., ...) fills the caller's outputs
    compact            <name>_count(c0, c1, scan, n, bits, offsets, ...) fills offsets (int64,
                       nchunks + 1: prefix-summed with `scan`) and bits (uint64,
                       (n + 63) // 64: the keep flags), then <name>_write(c0, c1, n, offsets,
                       out0.., ...) with outputs of offsets[-1] (or
                       <name>_write_sparse(c0, c1, n, offsets, bits, out0.., ...))
Output arrays hold `storage_dtype` elements (float16 as its uint16 bits); so do inputs. A map
or compaction takes each array of shaped elements as one (n, m) input (`whole_arrays`).
Chunks are CHUNK elements whatever the thread count, and partials are combined in chunk
order, so a result's bits depend only on the input. No function carries a fastmath flag:
float sums add in the fixed order _codegen/sum_order.py spells out (lane arrays the
printed chunk loop adds row by row; LLVM vectorises those rows without regrouping an add),
which the numpy tier reproduces; the element function's arithmetic, even once inlined,
keeps strict IEEE semantics.
"""
from __future__ import annotations

from ..capabilities import DialectCaps
from ..ops import STAGE_OPS
from ..ir.program import Filter, Let, Pass
from .numba_indexed import gathers
from .numba_py_expr import ExprPrinter
from .numba_py_helpers import helper_source, jit_decorator

NAME = "numba"                        # the dialect's name (the cpu backend's `dialect`)
# Every NumPy type as a value; chunks handed to the cores, not blocks: no block waits on
# another, no shuffles, no atomics in the generated code (the scan runs chunk totals, then carries)
CAPS = DialectCaps("Python (numba)")
from ..sum_order import CHUNK        # elements per chunk (fixed: results don't depend on threads)


def storage_dtype(dtype: str) -> str:
    """Element type of the arrays the kernels see: float16 travels as its uint16 bits
    (numba has no CPU float16), everything else as itself."""
    return "uint16" if dtype == "float16" else dtype


def render(p: Pass, cache: bool = False) -> str:
    """The module source for pass `p`; `cache=True` switches numba's on-disk cache on for
    every function (for a module imported from a file, as the cpu backend does)."""
    return _ModulePrinter(p, cache, whole_arrays(p)).render()


def whole_arrays(p: Pass) -> tuple:
    """The arrays of shaped elements (_codegen/elements.py) that `render`'s module takes
    whole, each as ONE 2-D argument `in_<array>` of shape (n, m) (any strides) read as
    in_<array>[i, j], in place of its m component columns: one base pointer and two strides
    instead of m of each (the rigid transform's 15 columns spilled registers: 5.4 -> 3.1 ms a
    core). Only map and compaction passes; reductions, passes read through a join's indexes
    and the scan / group_by modules take the columns. The cpu backend binds the arrays
    (backends/cpu_elements.py)."""
    if type(p) is not Pass or p.stage_op == "reduce":
        return ()
    from ..elements import arrays
    return arrays(p.program)


class _ModulePrinter:
    input_loads: dict = {}            # input number -> the text standing for its load

    def __init__(self, p: Pass, cache: bool, arrays: tuple = ()):
        if not p.name.isidentifier():
            raise ValueError(f"Pass.name {p.name!r} is not a valid identifier")
        self.p = p
        self.prog = p.program
        self.helpers: set = set()
        self.cache = cache
        # inputs read through an index column (an IndexedPass: numba_indexed)
        self.gathers = gathers(p) if getattr(p, "via", ()) else {}
        # decorators: "scalar" (helpers, element, fold), "chunk" (reduce partials: strict
        # IEEE too, sum_order's explicit lanes), "entry" (the entry points over a range of
        # chunks, without the GIL: the morsel scheduler's threads call them)
        self.jits = {"scalar": jit_decorator(cache), "entry": jit_decorator(cache, nogil=True),
                     "chunk": jit_decorator(cache)}
        # input k -> (element array, component j) for the arrays taken whole (whole_arrays)
        self.components = {a.first + j: (a, j) for a in arrays for j in range(a.m)}
        firsts = {a.first: a for a in arrays}
        ins = [f"in_{firsts[k].name}" if k in firsts else f"in_{s.name}"
               for k, s in enumerate(self.prog.inputs) if k in firsts or k not in self.components]
        # inputs then params: every kernel function takes them after its own arguments
        self.args = ", ".join(ins + [f"p_{s.name}" for s in self.prog.params])

    def a(self, first: str) -> str:
        """Argument list: `first` followed by the inputs and params."""
        return ", ".join(x for x in (first, self.args) if x)

    def render(self) -> str:
        self.op = STAGE_OPS[self.p.stage_op]
        element, kernels = self.op.render_numba(self)
        helpers = [helper_source(kind, ft, self.cache) for kind, ft in sorted(self.helpers, key=str)]
        return "\n\n\n".join([self._header()] + helpers + [element] + kernels) + "\n"

    def _header(self) -> str:
        prog = self.prog
        ins = ", ".join(f"{s.name}: {s.dtype}" for s in prog.inputs) or "none (index only)"
        params = ", ".join(f"{s.name}: {s.dtype}" for s in prog.params) or "none"
        return (f'"""querycompute cpu kernels for pass {self.p.name!r} '
                f'(dialect numba, generated).\n\n'
                f"inputs: {ins}\nparams: {params}\n"
                f"terminal: {self.op.describe(self.p)}\n"
                f'Globals come from querycompute._codegen.dialects.numba_py_runtime.namespace().\n"""\n'
                f"CHUNK = {CHUNK}")

    def element_name(self) -> str:
        return f"{self.p.name}_element"

    # ---- element function ----------------------------------------------------------------
    def element(self, values, returns) -> str:
        """def <name>_element(i, inputs..., params...) -> (keep, values...): the values of the
        expressions `values`, turned into what the element returns by the stage op's
        `returns(value names, lines)` (which may append statements to `lines`).

        Filters don't branch: every statement is computed for every element (expressions
        are pure and never trap), and `keep` is the conjunction of the filters, so the
        caller's loop stays a straight line LLVM can vectorise."""
        prog = self.prog

        def load(k: int) -> str:
            if k in self.input_loads:       # a value the module computes (numba_scan_fused)
                return self.input_loads[k]
            spec = prog.inputs[k]
            if k in self.components:        # component j of an array taken whole
                arr, j = self.components[k]
                text = f"in_{arr.name}[i, {j}]"
            else:
                text = self.gathers.get(k, f"in_{spec.name}[i]")
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
        names = [ep.value(e) for e in values]
        keep = " & ".join(f"({t})" for t in keep_terms) or "True"
        ep.lines.append(f"keep = {keep}")
        values = returns(names, ep.lines)
        ret = ", ".join(["keep"] + values)
        return (f"{self.jits['scalar']}\n"
                f"def {self.element_name()}({self.a('i')}):\n"
                f'    """Element i: (keep, values...); i is unsigned so loads skip '
                f'negative-index fix-ups."""\n'
                + "".join(f"    {line}\n" for line in ep.lines) +
                f"    return ({ret},)")

    def keep_function(self) -> str:
        """def <name>_keep(i, inputs..., params...) -> (keep,): the filters alone, which
        read only what they read (a pass that skips elements calls it first)."""
        return self.element([], lambda values, lines: []).replace(
            f"def {self.element_name()}(", f"def {self.p.name}_keep(", 1)

    def keep_call(self) -> str:
        return f"{self.p.name}_keep({self.a('np.uint64(i)')})[0]"

    def to_storage(self, name: str, dtype: str) -> str:
        if dtype == "float16":
            self.helpers.add(("f16_encode", None))
            return f"_f16_encode({name})"
        return name
