"""Parameters narrowed for dialects without 64-bit types (WGSL) or without float64 (Metal).

A captured Python scalar is a weak kernel parameter of a 64-bit type (int64, or float64 for a
float), cast inside the kernel to the type NumPy computes in: `float32_value * k` casts the
float64 `k` to float32, `int32_value > t` casts the int64 `t` to int32. A dialect with no
64-bit types would refuse such a pass although no element value needs 64 bits.

When every use of such a parameter is one cast `Cast(Param, T)` to the same 32-bit type T
(or `Cast(-Param, T)`: negation commutes with the cast, both for rounding to nearest and for
wrap-around), the cast can move to the host: the parameter is declared as T and the launch converts the
value (launch.scalar_arg: `np.dtype(T).type(value)`, NumPy's astype of a scalar, which is
the cast's own semantics: round to nearest float32, wrap-around int32 / uint32; a weak int
was range-checked at launch already, see the query layer's param_limits). The kernel then
computes exactly what it computed with the cast inside.

Narrowed: int64 / uint64 -> int32, uint32, float32 and float64 -> float32. Not narrowed:
targets held in a wider scalar-struct member than their type (float16 and 8/16-bit integers: the
host would convert to the member type, skipping the rounding or wrap of the cast), float ->
integer casts (NaN and out-of-range values have per-target rules), and parameters used
directly; those keep their 64-bit type and the dialect's pass check names them. A parameter
no expression reads is declared 32-bit too (its value is never used).
"""
from __future__ import annotations

from dataclasses import replace

from .ir import expr as E
from .ir.program import Filter, Let, Pass

_NARROWED = {"int64": ("int32", "uint32", "float32"), "uint64": ("int32", "uint32", "float32"),
             "float64": ("float32",)}


def narrow_params(p: Pass) -> Pass:
    """`p` with each parameter that is only ever cast to one 32-bit type declared as that type
    (the casts removed); `p` itself when there is none."""
    roots = _roots(p)
    window = {p.program.params[i].name for i in (p.window_params or ())}
    targets: dict[str, set] = {}
    for root in roots:
        _uses(root, targets)
    narrowed = {s.name: next(iter(targets[s.name])) for s in p.program.params
                if s.name not in window and len(targets.get(s.name, ())) == 1
                and next(iter(targets[s.name])) in _NARROWED.get(s.dtype, ())}
    # A parameter no expression reads (a captured int whose only use became an exact
    # parameter derived from it, frontend/exact.py) is declared 32-bit: its value is unused.
    narrowed.update({s.name: _NARROWED[s.dtype][0] for s in p.program.params
                     if s.name not in window and s.name not in targets and s.dtype in _NARROWED})
    if not narrowed:
        return p

    def rw(e: E.Expr) -> E.Expr:
        param = _cast_param(e)
        if param is not None and param.name in narrowed:
            narrow = E.Param(param.name, e.dtype)
            return narrow if e.x is param else replace(e.x, x=narrow, dtype=e.dtype)
        if isinstance(e, E.Unary):
            return replace(e, x=rw(e.x))
        if isinstance(e, (E.Binary, E.Compare)):
            return replace(e, a=rw(e.a), b=rw(e.b))
        if isinstance(e, (E.Call, E.Cast)):
            return replace(e, x=rw(e.x))
        if isinstance(e, E.Where):
            return replace(e, cond=rw(e.cond), a=rw(e.a), b=rw(e.b))
        return e

    prog = p.program
    body = tuple(replace(s, expr=rw(s.expr)) if isinstance(s, Let) else replace(s, cond=rw(s.cond))
                 for s in prog.body)
    params = tuple(replace(s, dtype=narrowed.get(s.name, s.dtype)) for s in prog.params)
    program = replace(prog, params=params, body=body, outputs=tuple(rw(o) for o in prog.outputs))
    terminal = p.terminal
    if hasattr(terminal, "aggs"):
        terminal = replace(terminal, aggs=tuple(
            replace(a, values=tuple(rw(v) for v in a.values),
                    combine=None if a.combine is None else rw(a.combine)) for a in terminal.aggs))
    return replace(p, program=program, terminal=terminal)


def _roots(p: Pass) -> list:
    prog = p.program
    out = [s.expr if isinstance(s, Let) else s.cond for s in prog.body if isinstance(s, (Let, Filter))]
    out += list(prog.outputs)
    for a in getattr(p.terminal, "aggs", ()):
        out += list(a.values) + ([a.combine] if a.combine is not None else [])
    return out


def _cast_param(e: E.Expr):
    """The Param of `Cast(Param, T)` or `Cast(-Param, T)` (also unary +), else None."""
    if not isinstance(e, E.Cast):
        return None
    x = e.x
    if isinstance(x, E.Unary) and x.op in ("neg", "pos"):
        x = x.x
    return x if isinstance(x, E.Param) else None


def _uses(e: E.Expr, targets: dict) -> None:
    """targets[name]: the dtype of each use of Param `name` (None for a use not in a cast)."""
    param = _cast_param(e)
    if param is not None:
        targets.setdefault(param.name, set()).add(e.dtype)
        return
    if isinstance(e, E.Param):
        targets.setdefault(e.name, set()).add(None)
        return
    for c in E.children(e):
        _uses(c, targets)
