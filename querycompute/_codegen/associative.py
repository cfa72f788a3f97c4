"""Which fold functions the compiler proves associative (DESIGN section 3, `aggregate`).

A fold (`aggregate(func, seed)`, `scan(func, seed)`, `qc.aggregate` in agg / group_by) runs
as a parallel tree only when its combine f(acc, item) is associative: f(f(a, b), c) ==
f(a, f(b, c)) for every a, b, c. Then any grouping of the elements in order gives LINQ's
func(..func(func(seed, x0), x1).., xn). Anything else runs as an in-order fold (CPU, numpy)
or is refused on GPU dialects and Dask, unless the user states `associative=True`.

`provably_associative(combine)` recognises, over the combine's expression IR (Var "acc",
Var "item"; captured values are Params, constants for the fold):

    a op v / v op a     op in + * min max & | ^ (and / or on bools), and more generally a
                        flattened chain of ONE such op whose operands are `a` once, `v` once
                        and any constants (a + v + 1, max(a, v, 0)): f(a, b) = a op b op K is
                        associative because op is associative and commutative
    v, a                keep last, keep first
    X if p else Y       X, Y each `a` or `v`, and p reads only `v` and constants ("last
                        non-zero": v if v != 0 else a), or only `a` and constants, or is one
                        comparison of `a` with `v` (v if v > a else a: a max)

Float + and * are accepted as for `sum` (associative up to rounding); float min / max as
np.minimum / np.maximum. Nothing else is proved (a - v, a * 2 + v, ...).
"""
from __future__ import annotations

from . import expr as E

# associative and commutative binary ops: a chain of one of them may be reordered
AC_OPS = ("add", "mul", "min", "max", "bitand", "bitor", "bitxor", "and", "or")


def provably_associative(combine: E.Expr) -> bool:
    """Whether the fold combine over Var("acc") and Var("item") is one of the forms in the
    module doc (so a parallel tree of partials gives the in-order fold's value)."""
    c = _strip(combine)
    if _is(c, "acc") or _is(c, "item"):
        return True
    if isinstance(c, E.Binary) and c.op in AC_OPS:
        leaves = _chain(c, c.op)
        acc = [x for x in leaves if _is(x, "acc")]
        item = [x for x in leaves if _is(x, "item")]
        rest = [x for x in leaves if not _is(x, "acc") and not _is(x, "item")]
        return len(acc) == 1 and len(item) == 1 and all(_reads(x) == set() for x in rest)
    if isinstance(c, E.Where):
        a, b = _strip(c.a), _strip(c.b)
        if not all(_is(x, "acc") or _is(x, "item") for x in (a, b)):
            return False
        reads = _reads(c.cond)
        if reads <= {"item"} or reads <= {"acc"}:
            return True
        cond = _strip(c.cond)
        return (isinstance(cond, E.Compare)
                and {_var(_strip(cond.a)), _var(_strip(cond.b))} == {"acc", "item"})
    return False


def _strip(e: E.Expr) -> E.Expr:
    """`e` without casts to its own type (no-ops)."""
    while isinstance(e, E.Cast) and e.x.dtype == e.dtype:
        e = e.x
    return e


def _is(e: E.Expr, name: str) -> bool:
    return isinstance(e, E.Var) and e.name == name


def _var(e: E.Expr):
    return e.name if isinstance(e, E.Var) else None


def _chain(e: E.Expr, op: str) -> list:
    """The operands of a nest of `op` nodes (all of one dtype), flattened."""
    e = _strip(e)
    if isinstance(e, E.Binary) and e.op == op:
        return _chain(e.a, op) + _chain(e.b, op)
    return [e]


def _reads(e: E.Expr) -> set:
    """The fold variables ("acc", "item") that `e` reads."""
    return {n.name for n in E.walk(e) if isinstance(n, E.Var)}
