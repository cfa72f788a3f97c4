"""Human-readable, Python-like text of the IR, for explain() and error messages."""
from __future__ import annotations

from .ir import expr as E
from .ir.program import Agg, ElementProgram, Filter, Let

_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
           "pow": "**", "bitand": "&", "bitor": "|", "bitxor": "^", "lshift": "<<", "rshift": ">>",
           "and": "and", "or": "or", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==",
           "ne": "!="}
_UNARY = {"neg": "-", "invert": "~", "not": "not "}


def fmt(e: E.Expr) -> str:
    t = type(e)
    if t is E.Const:
        return f"{e.value!r}:{e.dtype}"
    if t is E.Param:
        return f"{e.name}:{e.dtype}"
    if t is E.Load:
        return f"in{e.input}[i]"
    if t is E.Lookup:
        return f"{e.table}[{fmt(e.index)}]"
    if t is E.Index:
        return "i"
    if t is E.Var:
        return e.name
    if t is E.Cast:
        return f"{e.dtype}({fmt(e.x)})"
    if t is E.Where:
        return f"({fmt(e.a)} if {fmt(e.cond)} else {fmt(e.b)})"
    if t is E.Call:
        return f"{e.fn}({fmt(e.x)})"
    if t is E.Unary:
        return f"abs({fmt(e.x)})" if e.op == "abs" else f"({_UNARY[e.op]}{fmt(e.x)})"
    if t in (E.Binary, E.Compare):
        if e.op in _SYMBOL:
            return f"({fmt(e.a)} {_SYMBOL[e.op]} {fmt(e.b)})"
        return f"{e.op}({fmt(e.a)}, {fmt(e.b)})"
    return repr(e)


def program_lines(p: ElementProgram) -> list[str]:
    lines = []
    for st in p.body:
        if isinstance(st, Let):
            lines.append(f"{st.name}: {st.expr.dtype} = {fmt(st.expr)}")
        elif isinstance(st, Filter):
            lines.append(f"keep if {fmt(st.cond)}")
    return lines


def agg_text(a: Agg) -> str:
    args = ", ".join(fmt(v) for v in a.values)
    extra = f", combine={fmt(a.combine)}, seed={a.seed.value!r}" if a.op == "fold" else ""
    order = ""
    if a.op == "fold":
        order = (" in element order (combine not provably associative: one sequential pass)"
                 if a.in_order else " as a parallel tree (combine associative)")
    return f"{a.op}({args}{extra}) -> {a.dtype}{order}"
