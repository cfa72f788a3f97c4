"""Entry point of GPU code generation: `render(p, dialect) -> KernelSet`.

The pass's stage op (ops/: map, compact, reduce; `Pass.stage_op` names it) lowers it into
kernel IR and the dialect's printer (dialects/) spells it. The KernelSet (launch.py) is the
whole contract with the runtimes.
"""
from __future__ import annotations

from dataclasses import replace

from . import elements
from .dialects.by_name import DIALECTS, printer
from .launch import KernelSet
from .lower.logical_blocks import over_logical_blocks
from .narrow_params import narrow_params
from .lower.vector import vectorize
from .traffic import touched
from .ops import STAGE_OPS
from .ir.program import Pass

__all__ = ["DIALECTS", "OCCUPANCY", "printer", "render"]     # DIALECTS, printer: dialects/by_name.py

# Blocks of BLOCK threads per multiprocessor the compiler must fit (CUDA __launch_bounds__'s
# second argument): 8 x 256 threads leave 32 registers a thread, a full SM on H100 for the
# streaming kernels' contiguous variants, which need no more (tests/test_issue18_ptx.py
# reads the counts; W6's strided variant would spill 208 bytes, so it is left free).
OCCUPANCY = {"elementwise": 8, "reduce": 8, "compact": 8}


def render(p: Pass, dialect: str) -> KernelSet:
    """Every kernel of pass `p` in `dialect` ("cuda", "opencl" or "metal"), with its launch
    rules. Raises codegen.errors.UnsupportedType when the dialect can't hold a dtype. A pass
    fused into a scan's last pass (ops/scan/fused_gpu.py) renders there."""
    if getattr(p, "scan", None) is not None:      # a ScanFusedGpuPass (ops/scan/fused_gpu.py)
        from .ops.scan import fused_gpu as scan_fused
        return scan_fused.render(p, dialect)
    pr = printer(dialect)
    if not (pr.CAPS.float64 and pr.CAPS.int64):
        p = narrow_params(p)      # no float64 (Metal) or no 64-bit types (WGSL): captured
                                  # Python scalars are cast on the host (narrow_params.py)
    prog = p.program
    in_dtypes = [s.dtype for s in prog.inputs]
    for d in in_dtypes + [s.dtype for s in prog.params]:
        pr.check(d)
    pr.check_pass(p)              # a dialect without 64-bit values refuses them (wgsl.py)
    op = STAGE_OPS[p.stage_op]
    low = op.lower_gpu(p, pr)
    kernels, shape = low.kernels, op.SHAPE
    kernels = list(kernels)
    arrays = elements.arrays(prog)       # whole shaped elements in the contiguous variant
    if pr.VECTOR_LOADS:
        kernels = [vectorize(k, arrays) for k in kernels]
    if shape in OCCUPANCY:       # not the strided variants: their index math spills in 32 registers
        strided = {s.name for s in low.specs if s.variant == "strided"}
        blocks = elements.min_blocks(arrays, low.elems_per_thread, OCCUPANCY[shape]) if pr.VECTOR_LOADS else OCCUPANCY[shape]
        kernels = [k if k.name in strided else replace(k, min_blocks=blocks) for k in kernels]
    header = (f"// querycompute pass {p.name}: {shape}, {len(kernels)} kernels, {dialect}\n"
              f"// compile options: {' '.join(pr.OPTIONS) or '(none)'}"
              + (f" ({pr.OPTIONS_WHY})" if pr.OPTIONS_WHY else ""))
    specs = list(low.specs)
    for j, spec in enumerate(specs):
        if spec.grid == "reduce":       # stage 1 of a reduction: any physical grid, same bits
            at = next(i for i, k in enumerate(kernels) if k.name == spec.name)
            kernels[at], specs[j] = over_logical_blocks(kernels[at], spec)
    source = pr.render(kernels, header)
    by_name = {k.name: k for k in kernels}
    specs = tuple(replace(s, **dict(zip(("reads", "writes"), touched(by_name[s.name])))) for s in specs)
    return KernelSet(dialect=dialect, pass_name=p.name, shape=shape, source=source, options=pr.OPTIONS,
                     kernels=specs, outputs=low.outputs, scratch=low.scratch,
                     result_slots=low.result_slots, elems_per_thread=low.elems_per_thread,
                     window=p.window_params, elements=tuple((a.buffer, a.first, a.m) for a in arrays))
