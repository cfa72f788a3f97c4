"""Wide loads for contiguous inputs: a thread's run of elements read 16 bytes at a time.

Every stage op walks its elements in runs (lower/element.per_thread_loop): thread t takes
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

Stores go the same way when every element of the run is stored (no `continue`: a map, not a
compaction): each `out[i] = v` at the element index into an output buffer becomes
`o_out[k] = v` into a thread-local array, and after the unrolled loop one wide store
(kernel_ir.VecStore) writes the run. The output buffers are the launch loop's own
allocations (16-byte aligned), and the run's first element is a multiple of ept, so the
store is aligned as the loads are; the tail stores element by element. Every element's
value is the same expression as before, so the stored bits are the same.

Whole shaped elements (elements.py) go the same way: the run's ept elements of an array of
m-scalar elements are ept*m consecutive scalars from element base on, read as one VecLoad of
ept*m scalars in loads of `elements.load_width` bytes each (PTX: several `ld.global.nc.v4`),
and component j of the run's element k is register k*m + j (the unrolled loop makes it a
constant). A run whose alignment allows no load wider than a scalar keeps its scalar loads.

Only dialects whose printer spells `VecLoad` and `VecStore` (`VECTOR_LOADS`) get the rewrite.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from .. import elements
from ..ir import expr as E
from ..ir import kernel_ir as K
from .element import BASE, INDEX

N = K.KVar("n", "int64")


def vectorize(kernel: K.Kernel, arrays=()) -> K.Kernel:
    """`kernel` with each of its run loops split into a wide-access full run and a tail.
    `arrays`: the pass's elements.ElementArray list (whole shaped elements)."""
    outputs = {a.name: a.dtype for a in kernel.args if a.kind == "output"}
    return replace(kernel, body=_stmts(kernel.body, outputs, {a.buffer: a for a in arrays}))


def _stmts(body, outputs, arrays) -> tuple:
    out = []
    for s in body:
        r = _stmt(s, outputs, arrays)
        out.extend(r) if isinstance(r, list) else out.append(r)     # a whole run: its statements
    return tuple(out)


def _stmt(s, outputs, arrays):
    if isinstance(s, K.For):
        if s.run:
            return _split(s, outputs, arrays)
        return replace(s, body=_stmts(s.body, outputs, arrays))
    if isinstance(s, K.If):
        return replace(s, then=_stmts(s.then, outputs, arrays), orelse=_stmts(s.orelse, outputs, arrays))
    return s


def _contiguous_loads(body) -> list[K.Declare]:
    """The element's input loads at index i (top-level Declares: element() never nests them)."""
    return [s for s in body if isinstance(s, K.Declare) and isinstance(s.init, K.KLoad)
            and s.init.index == INDEX and s.init.buffer.startswith("in_")]


def _dense_stores(body, outputs) -> list[K.Store]:
    """The element's stores at index i into output buffers, when every element of the run
    reaches them (top-level statements, no `continue` or `break` anywhere in the body)."""
    if _has(body, (K.Continue, K.Break)):
        return []
    read = {b for b in outputs if _mentions_load(body, b)}      # (a buffer the element reads back)
    return [s for s in body if isinstance(s, K.Store) and s.index == INDEX and s.buffer in outputs
            and not s.volatile and s.buffer not in read]


def _element_runs(body, arrays: dict, ept: int, k: K.KVar) -> tuple[list, dict]:
    """(VecLoads of whole-element runs, id of each component load they replace -> its
    register) for the element arrays this run reads (elements.py)."""
    runs, regs = {}, {}
    for s in body:
        if not (isinstance(s, K.Declare) and isinstance(s.init, K.KLoad) and s.init.buffer in arrays):
            continue
        a = arrays[s.init.buffer]
        width = elements.load_width(a, ept)
        if not width:
            continue
        j = _component_index(s.init.index)
        run = runs.setdefault(a.buffer, K.VecLoad(f"r_{a.name}", a.buffer, K.op("*", BASE, K.i64(a.m)),
                                                  a.dtype, ept * a.m, width))
        at = K.op("*", k, K.i32(a.m))                      # element k of the run, component j
        at = (K.op("+", at, K.i32(j)) if j else at) if ept > 1 else K.i32(j)
        regs[id(s)] = K.KLocal(run.name, at, s.var.dtype)
    return list(runs.values()), regs


def _component_index(index: K.KExpr) -> int:
    """j of a whole-element load's index `i * m + j` (or `i * m` for j = 0: lower/element.py)."""
    return index.b.value if isinstance(index, K.KOp) and index.op == "+" else 0


def _split(loop: K.For, outputs, element_arrays) -> K.Stmt:
    declare_i, bound_check, *body = loop.body
    ept, k = loop.run, loop.var
    # a run of one element gains nothing from a "wide" load of one scalar
    loads = _contiguous_loads(body) if ept > 1 else []
    stores = _dense_stores(body, outputs) if ept > 1 else []
    runs, regs = _element_runs(body, element_arrays, ept, k)
    if not loads and not stores and not runs:
        return loop
    arrays = {id(s): K.VecLoad("r_" + s.var.name[2:], s.init.buffer, BASE, s.var.dtype, ept) for s in loads}
    staged = {id(s): K.LocalArray("o_" + s.buffer, outputs[s.buffer], ept) for s in stores}
    fast_body = []
    for s in body:
        if id(s) in regs:
            s = K.Declare(s.var, regs[id(s)])
        elif id(s) in arrays:
            s = K.Declare(s.var, K.KLocal(arrays[id(s)].name, k, s.var.dtype))
        elif id(s) in staged:
            s = K.SetLocal(staged[id(s)].name, k, s.value)
        fast_body.append(s)
    uses_i = _mentions(fast_body, INDEX.name)      # (an unused `i` draws an NVRTC warning)
    full = K.For(k, loop.init, loop.cond, loop.step, (declare_i,) * uses_i + tuple(fast_body), unroll=True)
    wide_stores = tuple(K.VecStore(a.name, s.buffer, BASE, a.dtype, ept)
                        for s in stores for a in (staged[id(s)],))
    whole_run = K.op("<=", K.op("+", BASE, K.i64(ept)), N)
    what = " and ".join(w for w, have in (("input in one wide load", loads), ("output in one wide store", stores),
                                          ("shaped element array in aligned wide loads", runs)) if have)
    fast = [K.Comment(f"A whole run of {ept}: each {what}, no bounds checks."),
            *runs, *arrays.values(), *staged.values(), full, *wide_stores]
    if loop.whole:                   # the caller checked that the run lies below n
        return fast
    return K.If(whole_run, tuple(fast),
                (K.Comment("The run that crosses n: element by element."), replace(loop, run=0)))


def _has(node, kinds) -> bool:
    """Whether a statement of one of `kinds` occurs in `node` (a statement list)."""
    if isinstance(node, kinds):
        return True
    if isinstance(node, (tuple, list)):
        return any(_has(x, kinds) for x in node)
    if is_dataclass(node) and not isinstance(node, (K.Elem, E.Expr)):
        return any(_has(getattr(node, f.name), kinds) for f in fields(node))
    return False


def _mentions_load(node, buffer: str) -> bool:
    """Whether `node` (a statement list) loads from `buffer`."""
    if isinstance(node, K.KLoad) and node.buffer == buffer:
        return True
    if isinstance(node, (tuple, list)):
        return any(_mentions_load(x, buffer) for x in node)
    if is_dataclass(node) and not isinstance(node, E.Expr):
        return any(_mentions_load(getattr(node, f.name), buffer) for f in fields(node))
    return False


def _mentions(node, name: str) -> bool:
    """Whether a kernel or element variable called `name` occurs in `node` (a statement list)."""
    if isinstance(node, (K.KVar, E.Var)):
        return node.name == name
    if isinstance(node, (tuple, list)):
        return any(_mentions(x, name) for x in node)
    if is_dataclass(node):
        return any(_mentions(getattr(node, f.name), name) for f in fields(node))
    return False
