"""The numba dialect of a scan fused with the pass after it: `scan -> where -> count / sum /
to_array` computes the running values inside that pass, so the scanned column is never
written and read again.

The scan (ops/scan/cpu.py) runs over fixed chunks of CHUNK elements: pass 1 folds
each chunk (T), the carries C[c] fold everything before chunk c (seed first), and pass 2
runs `acc = combine(acc, x[i])` through each chunk from C[c]. The passes of the reduce and
compact ops have the same chunk structure: their loops visit chunk c's elements in order,
from the chunk's first element (reduce's `<pass>_chunk(c * CHUNK, ...)`, compact's count and
write loops), one thread per chunk. So the fused pass's element function reads the scanned
value as `<scan>_step(i, x, CS)`: CS[2c + 1] holds C[c], CS[2c] the chunk's running value
(one slot per chunk, so threads never share one); the chunk's first element starts from
the carry, the others from the running value, and the new value is stored back. The scanned value of element i is then
exactly what the scan would have stored (the same combines in the same order), and the
fused pass's result equals the two-stage plan's bit for bit.

The fused pass is `ScanFusedPass`: the pass after the scan with one more input (CS, in
the scan's register type) and the scan's params appended (as `scan_<name>`); its input
0 is the scan's INPUT column. What it may not be: a map (its loop runs over elements
with no chunk start), a windowed compaction, or the compaction's sparse writer
(which calls the filter and the element separately: the running value would advance twice
per element); `fusable` says which passes qualify, and the module leaves the sparse writer
out (cpu.Launch then takes the dense one).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .. import STAGE_OPS
from ...ir.program import InputSpec, ParamSpec, Pass, Reduce, ToArray
from ...ir.stage_specs import ScanSpec
from . import cpu as numba_scan
from ...dialects.numba_py import _ModulePrinter
from ...dialects.numba_py_expr import register_type
from ...dialects.numba_py_helpers import helper_source


@dataclass(frozen=True)
class ScanFusedPass(Pass):
    """Pass `name` with the scan `scan` computing its input 0 (module doc)."""
    scan: ScanSpec = None


def fusable(p: Pass) -> bool:
    """Whether pass `p` can take the scan's running values (module doc): one input, and a
    reduce or a compaction without a window."""
    t = p.terminal
    one_input = len(p.program.inputs) == 1
    if isinstance(t, Reduce):
        return one_input
    return one_input and isinstance(t, ToArray) and t.window is None and p.program.has_filter


def carry_dtype(spec: ScanSpec) -> str:
    """The dtype of the carries' arrays: the scan's register type (float16 in float32)."""
    t = register_type(spec.dtype)
    return "bool" if t == "bool" else t.replace("np.", "")


def fuse(p: Pass, spec: ScanSpec) -> ScanFusedPass:
    """Pass `p` (input 0: the scanned column) reading the running values of `spec` instead."""
    if not fusable(p):
        raise ValueError(f"pass {p.name} cannot run inside scan {spec.name}: it must be a reduce or a "
                         f"compaction without a window over the one scanned column")
    prog = p.program
    cd = carry_dtype(spec)
    inputs = prog.inputs + (InputSpec("scan_CS", cd),)
    params = prog.params + tuple(ParamSpec(f"scan_{q.name}", q.dtype) for q in spec.params)
    return ScanFusedPass(replace(prog, inputs=inputs, params=params), p.terminal,
                         f"{p.name}_in_{spec.name}", spec)


class _Printer(_ModulePrinter):
    def __init__(self, p: ScanFusedPass, cache: bool):
        super().__init__(p, cache)
        spec = p.scan
        x = f"in_{p.program.inputs[0].name}"
        sp = "".join(f", p_scan_{q.name}" for q in spec.params)
        self.input_loads = {0: f"{spec.name}_step(i, {x}, in_scan_CS{sp})"}

    def render(self) -> str:
        """As the pass's module, less the compaction's sparse writer and the filter-only
        function it calls (module doc): the backend then always takes the dense writer."""
        self.op = STAGE_OPS[self.p.stage_op]
        element, kernels = self.op.render_numba(self)
        kernels = [k for k in kernels if f"def {self.p.name}_write_sparse(" not in k
                   and f"def {self.p.name}_keep(" not in k]
        helpers = [helper_source(kind, ft, self.cache) for kind, ft in sorted(self.helpers, key=str)]
        return "\n\n\n".join([self._header()] + helpers + [element] + kernels) + "\n"


def render(p: ScanFusedPass, cache: bool = False) -> str:
    """The module: the scan's functions, then the pass's (its element reading the scan)."""
    scan = numba_scan.render(p.scan, cache)
    return scan + "\n\n" + _Printer(p, cache).render()
