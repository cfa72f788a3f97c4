"""Lowering of one element's computation (ElementProgram body) into kernel statements.

Naming scheme (every generated identifier is a valid C name that can't collide with a C
keyword or with the kernels' own locals, which never contain an underscore after one letter):
input buffers `in_<name>`, their strides `s_<name>`, their loaded values `x_<name>`,
parameters `p_<name>`, program locals `v_<name>`, outputs `out<k>`; `i` is the element index.
"""
from __future__ import annotations

import re
from dataclasses import fields, replace

from . import dtypes as D
from . import expr as E
from . import kernel_ir as K
from .errors import InvalidName
from .launch import KernelArg
from .program import ElementProgram, Filter, Let

_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
INDEX = K.KVar("i", "int64")


def check_name(name: str, what: str) -> str:
    if not _C_NAME.match(name):
        raise InvalidName(f"{what} name {name!r} is not a valid C identifier "
                          "(letters, digits and _, not starting with a digit); rename it")
    return name


def input_args(prog: ElementProgram, strided: bool) -> list[KernelArg]:
    """Input buffers (and their element strides in the strided variant), then parameters."""
    args = [KernelArg(f"in_{check_name(s.name, 'input')}", "input", s.dtype, k)
            for k, s in enumerate(prog.inputs)]
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
    if isinstance(e, E.Var):
        return (extra or {}).get(e.name) or E.Var(f"v_{e.name}", e.dtype)
    kids = {f.name: rename(getattr(e, f.name), prog, extra)
            for f in fields(e) if isinstance(getattr(e, f.name), E.Expr)}
    return replace(e, **kids) if kids else e


def _used_inputs(prog: ElementProgram, extra_exprs) -> list[int]:
    roots = [s.expr if isinstance(s, Let) else s.cond for s in prog.body] + list(extra_exprs)
    used = {node.input for root in roots for node in E.walk(root) if isinstance(node, E.Load)}
    return sorted(used)


def element(prog: ElementProgram, strided: bool, consumed) -> tuple[list, K.KExpr | None]:
    """Statements computing element INDEX, plus its keep condition (None: no filter).
    `consumed` are the expressions the caller will evaluate (outputs or agg values), so only
    the inputs something reads are loaded."""
    stmts = []
    for k in _used_inputs(prog, consumed):
        spec = prog.inputs[k]
        where = K.op("*", INDEX, K.KVar(f"s_{spec.name}", "int64")) if strided else INDEX
        stmts.append(K.Declare(K.KVar(f"x_{spec.name}", spec.dtype),
                               K.KLoad(f"in_{spec.name}", where, spec.dtype)))
    keep = None
    for s in prog.body:
        if isinstance(s, Let):
            name = f"v_{check_name(s.name, 'local')}"
            stmts.append(K.Declare(K.KVar(name, s.expr.dtype), K.Elem(rename(s.expr, prog))))
        elif isinstance(s, Filter):
            cond = rename(s.cond, prog)
            keep = cond if keep is None else E.Binary("and", keep, cond, "bool")
    return stmts, (K.Elem(keep) if keep is not None else None)


def elems_per_thread(dtypes) -> int:
    """16-byte wide accesses: 16 / largest element size (4 when nothing is read)."""
    sizes = [D.itemsize(d) for d in dtypes]
    return max(1, 16 // max(sizes)) if sizes else 4


def thread_base(ept: int) -> K.KExpr:
    """First element of this thread's run of `ept` consecutive elements."""
    gid = K.op("+", K.op("*", K.KCast(K.KThread("group_id"), "int64"),
                         K.KCast(K.KThread("local_size"), "int64")),
               K.KCast(K.KThread("local_id"), "int64"))
    return K.op("*", gid, K.i64(ept)) if ept > 1 else gid


BASE = K.KVar("base", "int64")


def declare_base(ept: int) -> K.Declare:
    return K.Declare(BASE, thread_base(ept))


def per_thread_loop(ept: int, body: list) -> K.For:
    """for k in 0..ept: i = base + k; if (i < n) body   (the thread's consecutive elements;
    `declare_base` must precede it)"""
    k = K.KVar("k", "int32")
    n = K.KVar("n", "int64")
    inner = (K.Declare(INDEX, K.op("+", BASE, K.KCast(k, "int64"))),
             K.If(K.op("<", INDEX, n), tuple(body)))
    return K.For(k, K.i32(0), K.op("<", k, K.i32(ept)), K.op("+", k, K.i32(1)), inner, unroll=True)
