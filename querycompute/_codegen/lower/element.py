"""Lowering of one element's computation (ElementProgram body) into kernel statements.

Naming scheme (every generated identifier is a valid C name that can't collide with a C
keyword or with the kernels' own locals, which never contain an underscore after one letter):
input buffers `in_<name>`, their strides `s_<name>`, their loaded values `x_<name>`,
parameters `p_<name>`, program locals `v_<name>`, outputs `out<k>`; `i` is the element index;
a thread's run of elements read by one wide load (lower/vector.py) `r_<name>`, the loaded
words `w_<name>`; an array of shaped elements read whole (elements.py) `in_<array>`.
"""
from __future__ import annotations

import re
from dataclasses import fields, replace

from .. import dtypes as D
from .. import elements
from ..ir import expr as E
from ..ir import kernel_ir as K
from ..errors import HostOnly, InvalidName
from ..launch import KernelArg
from ..ir.program import ElementProgram, Filter, Let

_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
INDEX = K.KVar("i", "int64")


def check_name(name: str, what: str) -> str:
    if not _C_NAME.match(name):
        raise InvalidName(f"{what} name {name!r} is not a valid C identifier "
                          "(letters, digits and _, not starting with a digit); rename it")
    return name


def input_args(prog: ElementProgram, strided: bool) -> list[KernelArg]:
    """Input buffers (and their element strides in the strided variant), then parameters.
    The contiguous variant binds an array of shaped elements once, as its component 0's input
    (elements.py: the launch loop passes the whole array there)."""
    whole = {} if strided else elements.components(prog)
    args = [KernelArg(whole[k][0].buffer if k in whole else f"in_{check_name(s.name, 'input')}",
                      "input", s.dtype, k)
            for k, s in enumerate(prog.inputs) if k not in whole or whole[k][1] == 0]
    if strided:
        args += [KernelArg(f"s_{s.name}", "stride", "int64", k) for k, s in enumerate(prog.inputs)]
    args += [KernelArg(f"p_{check_name(s.name, 'parameter')}", "param", s.dtype, k)
             for k, s in enumerate(prog.params)]
    return args


def rename(e: E.Expr, prog: ElementProgram, extra: dict | None = None) -> E.Expr:
    """Rewrite Load / Index / Param / Var nodes into Vars naming kernel locals; Vars named in
    `extra` are replaced by the given expressions instead (a fold's acc / item)."""
    if isinstance(e, E.Load):
        return E.Var(f"x_{prog.inputs[e.input].name}", e.dtype)
    if isinstance(e, E.Index):
        return E.Var(INDEX.name, "int64")
    if isinstance(e, E.Param):
        return E.Var(f"p_{e.name}", e.dtype)
    if isinstance(e, E.Lookup):
        raise HostOnly("GPU")
    if isinstance(e, E.Var):
        return (extra or {}).get(e.name) or E.Var(f"v_{e.name}", e.dtype)
    kids = {f.name: rename(getattr(e, f.name), prog, extra)
            for f in fields(e) if isinstance(getattr(e, f.name), E.Expr)}
    return replace(e, **kids) if kids else e


def _names(e: E.Expr, kind) -> set:
    """Names of the Var nodes (kind=E.Var) or input numbers of the Load nodes (kind=E.Load)."""
    return {n.name if kind is E.Var else n.input for n in E.walk(e) if isinstance(n, kind)}


def _live(prog: ElementProgram, consumed) -> list:
    """The body without Lets nothing reads: not the consumed expressions, a Filter, or a
    later live Let (e.g. a count-only pass needs none of the select results)."""
    needed = set().union(*(_names(e, E.Var) for e in consumed))
    live = []
    for s in reversed(prog.body):
        if isinstance(s, Filter) or s.name in needed:
            needed |= _names(s.cond if isinstance(s, Filter) else s.expr, E.Var)
            live.append(s)
    return live[::-1]


def element(prog: ElementProgram, strided: bool, consumed) -> list:
    """Statements computing element INDEX in program order. A Filter becomes
    `if (!cond) continue;`, so the statements after it, and those the caller appends (using
    `consumed`: outputs or agg values), run only for survivors. The caller places them in a
    loop over elements with no barrier inside. Each input is loaded just before its first
    use; inputs and locals nothing reads are left out."""
    stmts, loaded = [], set()
    whole = {} if strided else elements.components(prog)

    def load_inputs(exprs):
        for k in sorted(set().union(*(_names(e, E.Load) for e in exprs)) - loaded):
            spec = prog.inputs[k]
            where = K.op("*", INDEX, K.KVar(f"s_{spec.name}", "int64")) if strided else INDEX
            buffer = f"in_{spec.name}"
            if k in whole:           # component j of a whole element: i * m + j of its array
                arr, j = whole[k]
                buffer, where = arr.buffer, K.op("*", INDEX, K.i64(arr.m))
                where = K.op("+", where, K.i64(j)) if j else where
            stmts.append(K.Declare(K.KVar(f"x_{spec.name}", spec.dtype),
                                   K.KLoad(buffer, where, spec.dtype)))
            loaded.add(k)

    for s in _live(prog, consumed):
        if isinstance(s, Let):
            load_inputs([s.expr])
            name = f"v_{check_name(s.name, 'local')}"
            stmts.append(K.Declare(K.KVar(name, s.expr.dtype), K.Elem(rename(s.expr, prog))))
        else:
            load_inputs([s.cond])
            drop = E.Unary("not", rename(s.cond, prog), "bool")
            stmts.append(K.If(K.Elem(drop), (K.Continue(),)))
    load_inputs(consumed)
    return stmts


def variant(kname: str, strided: bool, doc: str) -> tuple[str, str]:
    """Name and doc comment of the contiguous or the strided variant of kernel `kname` (the
    strided doc points to the contiguous one instead of repeating it)."""
    if strided:
        return f"{kname}_strided", f"{kname}, reading input x at in_x[i * s_x] (strided inputs)."
    return kname, doc


def elems_per_thread(dtypes) -> int:
    """16-byte wide accesses: 16 / largest element size (4 when nothing is read)."""
    sizes = [D.itemsize(d) for d in dtypes]
    return max(1, 16 // max(sizes)) if sizes else 4


def _times_ept(e: K.KExpr, ept: int) -> K.KExpr:
    return K.op("*", e, K.i64(ept)) if ept > 1 else e


def thread_base(ept: int) -> K.KExpr:
    """First element of this thread's run of `ept` consecutive elements."""
    gid = K.op("+", K.op("*", K.KCast(K.KThread("group_id"), "int64"),
                         K.KCast(K.KThread("local_size"), "int64")),
               K.KCast(K.KThread("local_id"), "int64"))
    return _times_ept(gid, ept)


BASE = K.KVar("base", "int64")


def declare_base(ept: int) -> K.Declare:
    return K.Declare(BASE, thread_base(ept))


def per_thread_loop(ept: int, body: list, whole: bool = False) -> K.For:
    """for k in 0..ept: i = base + k; stop at n; body   (the thread's consecutive elements;
    `declare_base` must precede it; `body` may `continue` to drop element i). `whole`: the
    caller made sure base + ept <= n, so lower/vector.py emits the wide run alone, no tail."""
    k = K.KVar("k", "int32")
    n = K.KVar("n", "int64")
    inner = (K.Declare(INDEX, K.op("+", BASE, K.KCast(k, "int64"))),
             K.If(K.op(">=", INDEX, n), (K.Break(),)),     # the rest of the run is past n too
             *body)
    return K.For(k, K.i32(0), K.op("<", k, K.i32(ept)), K.op("+", k, K.i32(1)), inner, unroll=True, run=ept,
                 whole=whole)


def grid_stride_runs(ept: int, body: list, before: list = (), after: list = ()) -> K.For:
    """for base = thread_base; base < n; base += grid threads * ept:
    `before`; per_thread_loop(body); `after`.
    Each step a thread takes its next run of `ept` consecutive elements, so contiguous inputs
    are read 16 bytes per thread at a time (one scalar element per thread and step kept pocl
    from vectorising: 3x slower), and the order in which a thread meets its elements depends
    only on n and the grid."""
    n = K.KVar("n", "int64")
    threads = K.op("*", K.KCast(K.KThread("num_groups"), "int64"), K.KCast(K.KThread("local_size"), "int64"))
    return K.For(BASE, thread_base(ept), K.op("<", BASE, n), K.op("+", BASE, _times_ept(threads, ept)),
                 (*before, per_thread_loop(ept, body), *after))
