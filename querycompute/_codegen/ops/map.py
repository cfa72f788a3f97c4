"""Stage op "map": a ToArray pass without a filter, every element stored at its own index.

Algorithm. Element i of the output is the chain applied to element i of the inputs, so every
element is independent and the order is kept by construction (no element moves).

GPU (one kernel, `<pass>_map`, contiguous and strided variants). Each thread handles `ept`
consecutive elements (16 / largest element size: 16-byte wide accesses on contiguous data,
which compilers turn into vector loads/stores); the strided variant gathers input elements
with per-input element strides. Outputs are always dense. Grid: ceil(n / (BLOCK * ept)).

CPU (numba, one entry point `<pass>_chunks(c0, c1, n, ...)`): a loop over the elements of
chunks [c0, c1) calling the element function and storing its values at index i; the cpu
backend's morsel scheduler (backends/cpu/morsels.py) hands ranges of chunks to the cores, or
runs all of them in one call for a small n. Output arrays are allocated by the caller (NumPy
asks the kernel for huge pages on big arrays, which makes first-touch page faults far cheaper
than numba's own allocation).

Deterministic: each output element is computed by one thread from its own inputs only.
Result decoding: none; the outputs are the results (n elements each).
"""
from __future__ import annotations

from ..ir import kernel_ir as K
from ..elements import run_elements
from ..launch import BufferSpec, KernelArg, KernelSpec
from ..lower.element import (INDEX, check_name, declare_base, element, elems_per_thread, input_args,
                             per_thread_loop, rename, variant)
from ..ir.program import Pass
from .common import GpuKernels

SHAPE = "elementwise"          # launch.KernelSet.shape of this op's kernels


def describe(p: Pass) -> str:
    """The terminal, as the numba module's header names it."""
    return "to_array"


# ---- GPU lowering -------------------------------------------------------------------------
def output_args(p: Pass) -> tuple[KernelArg, ...]:
    return tuple(KernelArg(f"out{k}", "output", d, k) for k, d in enumerate(p.program.output_dtypes))


def lower_gpu(p: Pass, pr) -> GpuKernels:
    """The contiguous and strided variants of the map kernel (`pr`, the dialect printer,
    is not needed: the map has no dialect-dependent choice)."""
    prog = p.program
    ept = run_elements(elems_per_thread([s.dtype for s in prog.inputs] + list(prog.output_dtypes)), prog)
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
    return GpuKernels(ept, kernels, specs, outputs)


# ---- CPU lowering (numba source) ----------------------------------------------------------
def numba_names(mp):
    """(output names, element value names, element call, unpacking target, output argument
    list) of the module printer `mp` (dialects.numba_py), shared with the compact op."""
    outs = [f"out{k}" for k in range(len(mp.prog.outputs))]
    elems = [f"e{k}" for k in range(len(outs))]
    call = f"{mp.element_name()}({mp.a('np.uint64(i)')})"
    unpack = ", ".join(["keep"] + elems)
    return outs, elems, call, unpack, ", ".join(outs)


def numba_element(mp) -> str:
    """The element function of a ToArray pass: its outputs, in storage types."""
    return mp.element(mp.prog.outputs,
                      lambda values, lines: [mp.to_storage(v, e.dtype) for v, e in zip(values, mp.prog.outputs)])


def render_numba(mp) -> tuple[str, list[str]]:
    """(element function, entry points) of the map: `<pass>_chunks`."""
    element_fn = numba_element(mp)
    outs, elems, call, unpack, out_args = numba_names(mp)
    stores = "".join(f"        {o}[i] = {e}\n" for o, e in zip(outs, elems))
    dense = (f"{mp.jits['entry']}\n"
             f"def {mp.p.name}_chunks({mp.a('c0, c1, n, ' + out_args)}):\n"
             f'    """No filter: element i of chunks [c0, c1) is stored at index i of every output."""\n'
             f"    for i in range(c0 * CHUNK, min(n, c1 * CHUNK)):\n"
             f"        {unpack} = {call}\n"
             f"{stores}").rstrip("\n")
    return element_fn, [dense]
