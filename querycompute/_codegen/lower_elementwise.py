"""Lowering of a ToArray pass without Filter: one fused map kernel.

Each thread handles `ept` consecutive elements (16 / largest element size: 16-byte wide
accesses on contiguous data, which compilers turn into vector loads/stores); the strided
variant gathers input elements with per-input element strides. Outputs are always dense.
"""
from __future__ import annotations

from . import kernel_ir as K
from .launch import BufferSpec, KernelArg, KernelSpec
from .lower_element import INDEX, check_name, declare_base, element, input_args, per_thread_loop, rename, variant
from .program import Pass


def output_args(p: Pass) -> tuple[KernelArg, ...]:
    return tuple(KernelArg(f"out{k}", "output", d, k) for k, d in enumerate(p.program.output_dtypes))


def lower_elementwise(p: Pass, ept: int):
    """-> (kernels, kernel specs, output buffers) for the contiguous and strided variants."""
    prog = p.program
    name = check_name(p.name, "pass")
    outs = output_args(p)
    kernels, specs = [], []
    for strided in (False, True):
        body = element(prog, strided, prog.outputs)
        body += [K.Store(a.name, INDEX, K.Elem(rename(e, prog))) for a, e in zip(outs, prog.outputs)]
        args = tuple(input_args(prog, strided)) + (KernelArg("n", "n", "int64"),) + outs
        kname, doc = variant(f"{name}_map", strided,
                             f"{name}: fused elementwise map; each thread handles {ept} consecutive elements.")
        kernels.append(K.Kernel(kname, args, (), (declare_base(ept), per_thread_loop(ept, body)), doc=doc))
        specs.append(KernelSpec(kname, args, "tiles", "strided" if strided else "contiguous", "map"))
    outputs = tuple(BufferSpec(a.name, a.dtype, "n") for a in outs)
    return kernels, specs, outputs
