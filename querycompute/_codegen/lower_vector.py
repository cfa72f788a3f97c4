"""Wide loads for contiguous inputs: a thread's run of elements read 16 bytes at a time.

Every stage op walks its elements in runs (lower_element.per_thread_loop): thread t takes
`ept` consecutive elements, ept = 16 / largest element size, starting at a multiple of ept.
Written element by element, each step of such a run is `i = base + k; if (i >= n) break;
x = in_x[i]; ...`: the bounds check between loads keeps the compiler from merging them
(CUDA PTX shows one scalar `ld.global.nc.f32` per element), and it serialises the loads.

`vectorize(kernel)` rewrites every run loop of a kernel whose inputs are read at the element
index itself (the contiguous variant; the strided variant reads `in_x[i * s_x]` and is left
as it is) into

    if (base + ept <= n) {                    // a full run: no bounds checks
        r_x[ept] = <one wide load of in_x[base .. base + ept)>   (each input: kernel_ir.VecLoad)
        for k in 0..ept (unrolled): i = base + k; x = r_x[k]; <the element's statements>
    } else {                                  // the run that crosses n: element by element
        <the original loop>
    }

Each input's load moves to the top of the run (element k's filter may still drop it: the
loads of a warp cover the same memory sectors either way), and the element statements stay
in program order, so the results are the same bits. A wide load needs the run's first
element aligned to ept * itemsize bytes: base is a multiple of ept, and the launch plan
runs the contiguous variant only when every input buffer is 16-byte aligned
(backends/gpu_launch.py; the others take the strided variant with stride 1).

Only dialects whose printer spells `VecLoad` (`VECTOR_LOADS`) get the rewrite.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from . import expr as E
from . import kernel_ir as K
from .lower_element import BASE, INDEX

N = K.KVar("n", "int64")


def vectorize(kernel: K.Kernel) -> K.Kernel:
    """`kernel` with each of its run loops split into a wide-load full run and a tail."""
    return replace(kernel, body=_stmts(kernel.body))


def _stmts(body) -> tuple:
    return tuple(_stmt(s) for s in body)


def _stmt(s):
    if isinstance(s, K.For):
        if s.run:
            return _split(s)
        return replace(s, body=_stmts(s.body))
    if isinstance(s, K.If):
        return replace(s, then=_stmts(s.then), orelse=_stmts(s.orelse))
    return s


def _contiguous_loads(body) -> list[K.Declare]:
    """The element's input loads at index i (top-level Declares: element() never nests them)."""
    return [s for s in body if isinstance(s, K.Declare) and isinstance(s.init, K.KLoad)
            and s.init.index == INDEX and s.init.buffer.startswith("in_")]


def _split(loop: K.For) -> K.Stmt:
    declare_i, bound_check, *body = loop.body
    loads = _contiguous_loads(body)
    if not loads:
        return loop
    ept, k = loop.run, loop.var
    arrays = {id(s): K.VecLoad("r_" + s.var.name[2:], s.init.buffer, BASE, s.var.dtype, ept) for s in loads}
    fast_body = [K.Declare(s.var, K.KLocal(arrays[id(s)].name, k, s.var.dtype)) if id(s) in arrays else s
                 for s in body]
    uses_i = _mentions(fast_body, INDEX.name)      # (an unused `i` draws an NVRTC warning)
    full = K.For(k, loop.init, loop.cond, loop.step, (declare_i,) * uses_i + tuple(fast_body), unroll=True)
    whole_run = K.op("<=", K.op("+", BASE, K.i64(ept)), N)
    return K.If(whole_run,
                (K.Comment(f"A whole run of {ept}: each input in one wide load, no bounds checks."),
                 *arrays.values(), full),
                (K.Comment("The run that crosses n: element by element."), replace(loop, run=0)))


def _mentions(node, name: str) -> bool:
    """Whether a kernel or element variable called `name` occurs in `node` (a statement list)."""
    if isinstance(node, (K.KVar, E.Var)):
        return node.name == name
    if isinstance(node, (tuple, list)):
        return any(_mentions(x, name) for x in node)
    if is_dataclass(node):
        return any(_mentions(getattr(node, f.name), name) for f in fields(node))
    return False
