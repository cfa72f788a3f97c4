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
    bitwise nests       any nest of & | ^ ~ (and / or / not on bools) over `a`, `v` and at
                        most BIT_CONSTANTS constants ((a & -256) | (v & 255): high bits from
                        the first element, low bits from the last): each bit of the result
                        is a function of the same bit of a, v and the constants, so the law
                        is checked for every 0/1 value of those bits (any constant values)
    X & M               X a chain of + or * as above and M a constant 2**k - 1: the chain
                        modulo 2**k ((a + v) & 1023)
    min / max nests     any nest of min and max over `a`, `v` and at most LATTICE_CONSTANTS
                        constants (a clamped running max: min(max(a, v), cap)): its value
                        depends only on how a, b, c and the constants are ordered, so both
                        sides of the associative law are compared over every weak ordering
                        of them (an exhaustive proof over any totally ordered type)

Float + and * are accepted as for `sum` (associative up to rounding); float min / max as
np.minimum / np.maximum. Nothing else is proved (a - v, a * 2 + v, ...).
"""
from __future__ import annotations

from .ir import expr as E

# associative and commutative binary ops: a chain of one of them may be reordered
AC_OPS = ("add", "mul", "min", "max", "bitand", "bitor", "bitxor", "and", "or")


def provably_associative(combine: E.Expr) -> bool:
    """Whether the fold combine over Var("acc") and Var("item") is one of the forms in the
    module doc (so a parallel tree of partials gives the in-order fold's value)."""
    c = _strip(combine)
    if _is(c, "acc") or _is(c, "item"):
        return True
    if _lattice_associative(c) or _bitwise_associative(c) or _masked_chain(c):
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


LATTICE_CONSTANTS = 3         # constants a min / max nest may hold (weak orderings of 6 items)
BIT_CONSTANTS = 6             # constants a bitwise nest may hold (2**9 bit assignments)
_LATTICE_OPS = {"min": min, "max": max}
_BIT_OPS = {"bitand": lambda x, y: x & y, "bitor": lambda x, y: x | y, "bitxor": lambda x, y: x ^ y,
            "and": lambda x, y: x & y, "or": lambda x, y: x | y}


def _nest(c: E.Expr, ops: dict, negate: bool):
    """c as a nested tuple over acc, item and constants, and its constants: (op, x, y) for a
    binary op in `ops`, ("not", x) for ~ / not when `negate`, "acc", "item", or a constant's
    index (a sub-expression reading neither). (None, consts) when c is no such nest."""
    consts: list = []

    def shape(e):
        e = _strip(e)
        if not _reads(e):
            if e not in consts:
                consts.append(e)
            return consts.index(e)
        if _is(e, "acc") or _is(e, "item"):
            return e.name
        if isinstance(e, E.Binary) and e.op in ops:
            x, y = shape(e.a), shape(e.b)
            return None if x is None or y is None else (e.op, x, y)
        if negate and isinstance(e, E.Unary) and e.op in ("invert", "not"):
            x = shape(e.x)
            return None if x is None else ("not", x)
        return None

    tree = shape(c)
    return (tree if isinstance(tree, tuple) else None), consts


def _value(t, acc, item, ks, ops: dict):
    """The nest `t` (_nest) evaluated at acc, item and the constants' values ks ("not": 0/1 bits)."""
    if t == "acc":
        return acc
    if t == "item":
        return item
    if isinstance(t, int):
        return ks[t]
    if t[0] == "not":
        return 1 - _value(t[1], acc, item, ks, ops)
    return ops[t[0]](_value(t[1], acc, item, ks, ops), _value(t[2], acc, item, ks, ops))


def _law_holds(tree, ops: dict, assignments) -> bool:
    """(a . b) . x == a . (b . x) for every (a, b, x, constants) in `assignments`."""
    def f(acc, item, ks):
        return _value(tree, acc, item, ks, ops)
    return all(f(f(a, b, ks), x, ks) == f(a, f(b, x, ks), ks) for a, b, x, *ks in assignments)


def _lattice_associative(c: E.Expr) -> bool:
    """Whether `c` is a nest of min / max over acc, item and constants (sub-expressions
    reading neither) that satisfies the associative law for every weak ordering of a, b, c
    and the constants (module doc)."""
    tree, consts = _nest(c, _LATTICE_OPS, negate=False)
    if tree is None or len(consts) > LATTICE_CONSTANTS:
        return False
    return _law_holds(tree, _LATTICE_OPS, _weak_orders(3 + len(consts)))


def _weak_orders(m: int):
    """Every assignment of ranks 0..k-1 (onto) to m items: all their weak orderings."""
    def fill(i, ranks):
        if i == m:
            if set(ranks) == set(range(max(ranks) + 1)):
                yield tuple(ranks)
            return
        for r in range(m):
            ranks.append(r)
            yield from fill(i + 1, ranks)
            ranks.pop()
    yield from fill(0, [])


def _bitwise_associative(c: E.Expr) -> bool:
    """Whether `c` is a nest of bitwise ops over acc, item and constants that satisfies the
    associative law bit by bit for every 0/1 value of a, b, c and the constants' bits."""
    if any(n.dtype.startswith("float") for n in E.walk(c)):
        return False
    tree, consts = _nest(c, _BIT_OPS, negate=True)
    if tree is None or len(consts) > BIT_CONSTANTS:
        return False
    m = 3 + len(consts)
    return _law_holds(tree, _BIT_OPS, (tuple((bits >> j) & 1 for j in range(m)) for bits in range(1 << m)))


def _masked_chain(c: E.Expr) -> bool:
    """X & M, X a provable chain of integer + or * and M a constant 2**k - 1 (module doc)."""
    if not (isinstance(c, E.Binary) and c.op == "bitand") or c.dtype in ("bool",) or c.dtype.startswith("float"):
        return False
    for x, m in ((_strip(c.a), _strip(c.b)), (_strip(c.b), _strip(c.a))):
        if (isinstance(m, E.Const) and isinstance(m.value, int) and m.value >= 0 and m.value & (m.value + 1) == 0
                and isinstance(x, E.Binary) and x.op in ("add", "mul") and provably_associative(x)):
            return True
    return False
