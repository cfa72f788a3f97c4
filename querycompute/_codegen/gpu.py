"""Entry point of GPU code generation: `render(p, dialect) -> KernelSet`.

Picks the kernel shape for the Pass (elementwise map, stream compaction, two-stage
reduction), lowers it into kernel IR (lower_*.py) and prints it with the dialect's printer
(dialects/). The KernelSet (launch.py) is the whole contract with the runtimes.
"""
from __future__ import annotations

from .dialects.c_family import CFamily
from .dialects.cuda import Cuda
from .dialects.metal import Metal
from .dialects.opencl import OpenCL
from .launch import KernelSet
from .lower_compact import lower_compact
from .lower_element import elems_per_thread
from .lower_elementwise import lower_elementwise
from .lower_reduce import lower_reduce
from .program import Pass, Reduce, ToArray

DIALECTS: dict[str, type[CFamily]] = {"cuda": Cuda, "opencl": OpenCL, "metal": Metal}


def printer(dialect: str) -> CFamily:
    try:
        return DIALECTS[dialect]()
    except KeyError:
        raise ValueError(f"unknown GPU dialect {dialect!r}; expected one of {', '.join(DIALECTS)}") from None


def render(p: Pass, dialect: str) -> KernelSet:
    """Every kernel of pass `p` in `dialect` ("cuda", "opencl" or "metal"), with its launch
    rules. Raises codegen.errors.UnsupportedType when the dialect can't hold a dtype."""
    pr = printer(dialect)
    prog = p.program
    in_dtypes = [s.dtype for s in prog.inputs]
    for d in in_dtypes + [s.dtype for s in prog.params]:
        pr.check(d)
    scratch, slots = (), ()
    if isinstance(p.terminal, ToArray):
        ept = elems_per_thread(in_dtypes + list(prog.output_dtypes))
        if prog.has_filter:
            shape = "compact"
            kernels, specs, outputs, scratch = lower_compact(p, ept)
        else:
            shape = "elementwise"
            kernels, specs, outputs = lower_elementwise(p, ept)
    elif isinstance(p.terminal, Reduce):
        shape = "reduce"
        ept = elems_per_thread(in_dtypes)
        kernels, specs, outputs, scratch, slots = lower_reduce(p, ept, pr.SHUFFLE_TYPES if pr.SHUFFLE_DOWN else (),
                                                               pr.FOLD_RUNS_APART)
    else:
        raise TypeError(f"unknown terminal {p.terminal!r}; expected ToArray or Reduce")
    header = (f"// querycompute pass {p.name}: {shape}, {len(kernels)} kernels, {dialect}\n"
              f"// compile options: {' '.join(pr.OPTIONS) or '(none)'}"
              + (f" ({pr.OPTIONS_WHY})" if pr.OPTIONS_WHY else ""))
    source = pr.render(kernels, header)
    return KernelSet(dialect=dialect, pass_name=p.name, shape=shape, source=source, options=pr.OPTIONS,
                     kernels=tuple(specs), outputs=outputs, scratch=scratch, result_slots=slots,
                     elems_per_thread=ept)
