"""The operation graph: one node type per operator and per terminal.

A Query is a source plus a chain of operator nodes (today a path: every node has one input;
a join will give a node two). Nodes hold what the user wrote and nothing derived: element
types, fused stages and kernels are the plan's (plan.py), computed once per signature.

    qc.query(x).select(f).where(p).sum()
      -> Source(x) -> Select(f) -> Where(p) -> Terminal("sum")

Operator nodes (lazy):   Select(fn)   map every element with fn
                         Where(fn)    keep the elements for which fn is true (order kept)
Pipeline breakers (lazy; each ends a fused stage, DESIGN.md section 5b; stages.py plans them):
                         OrderBy / OrderByDescending(key), ThenBy / ThenByDescending(key),
                         Take(n) / Skip(n) (n a Count: a kernel parameter, never compiled in),
                         TakeWhile / SkipWhile(pred), Reverse(), Distinct(key), Scan(func, seed)
Terminal nodes:          Terminal(name, specs): to_array / to_list, or aggregates given as
                         (result key, AggSpec) pairs (sum, count(pred), agg(...), aggregate);
                         last / element_at / single (positional: planned by stages.py).

Adding an operator means a node class here (with its `kind`, the letter it adds to a chain's
signature, and its functions), a cut/fuse rule in plan.py, a stage op in the kernel compiler
and a reference function in the numpy backend (docs/architecture.md walks through it).
"""
from __future__ import annotations

from . import terminals as T


class Op:
    """An operator node: `kind` names it, `letter` stands for it in a chain's signature,
    `fn` is the user's function (a lambda, a def, or a lambda parsed from text)."""
    __slots__ = ("fn",)
    kind = "?"
    letter = "?"

    def __init__(self, fn):
        self.fn = fn

    def __repr__(self) -> str:
        return f"{self.kind}(...)"


class Select(Op):
    __slots__ = ()
    kind, letter = "select", "s"


class Where(Op):
    __slots__ = ()
    kind, letter = "where", "w"


class Terminal:
    """A terminal node. `specs` holds (result key, AggSpec) pairs; `signature` is what of it
    changes the compiled pass (not defaults). `fns` are the functions the specs carry; a shared
    terminal (made once, reused by every call: PLAIN / WITH_FN below) carries T.PER_CALL
    instead and each call passes its own functions."""
    __slots__ = ("name", "specs", "standalone", "fns", "signature", "shared")

    def __init__(self, name: str, specs: tuple = (), standalone: bool = True, shared: bool = False):
        self.name = name
        self.specs = specs
        self.standalone = standalone
        self.shared = shared
        self.fns = tuple([s.fn for _, s in specs if s.fn is not None and s.fn is not T.PER_CALL])
        self.signature = (name, standalone,
                          tuple([(s.kind, s.fn is not None, type(s.seed), s.seed, s.associative)
                                 for _, s in specs]))

    def __repr__(self) -> str:
        return f"Terminal({self.name})"


# Shared terminals: every terminal called without a default, with no function (PLAIN) or with
# one given per call (WITH_FN: q.count(lambda v: ...)). The warm path allocates none.
PLAIN = {name: Terminal(name, shared=True) for name in ("to_array", "to_list")}
PLAIN.update({name: Terminal(name, ((name, spec),), shared=True) for name, spec in T.PLAIN.items()})
WITH_FN = {name: Terminal(name, ((name, T.AggSpec(name, T.PER_CALL)),), shared=True)
           for name in T.PLAIN}


class Count:
    """The argument of take(n) / skip(n) / element_at(i): read on every call, like a captured
    value, so a new n never recompiles."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class ScanArg:
    """scan(func, seed, associative=...): the fold function, its seed (compiled in, as for
    aggregate; it is part of the chain's signature) and whether the user states func
    associative (terminals.AggSpec)."""
    __slots__ = ("fn", "seed", "associative")

    def __init__(self, fn, seed, associative: bool = False):
        self.fn = fn
        self.seed = seed
        self.associative = associative


class Breaker(Op):
    """A pipeline breaker: ends the fused stage before it (stages.py)."""
    __slots__ = ()


class OrderBy(Breaker):
    __slots__ = ()
    kind, letter, descending = "order_by", "o", False


class OrderByDescending(Breaker):
    __slots__ = ()
    kind, letter, descending = "order_by_descending", "O", True


class ThenBy(Breaker):
    __slots__ = ()
    kind, letter, descending = "then_by", "t", False


class ThenByDescending(Breaker):
    __slots__ = ()
    kind, letter, descending = "then_by_descending", "T", True


class Take(Breaker):
    __slots__ = ()
    kind, letter = "take", "k"


class Skip(Breaker):
    __slots__ = ()
    kind, letter = "skip", "K"


class TakeWhile(Breaker):
    __slots__ = ()
    kind, letter = "take_while", "a"


class SkipWhile(Breaker):
    __slots__ = ()
    kind, letter = "skip_while", "A"


class Reverse(Breaker):
    __slots__ = ()
    kind, letter = "reverse", "r"


class Distinct(Breaker):
    __slots__ = ()
    kind, letter = "distinct", "d"


class Scan(Breaker):
    __slots__ = ()
    kind, letter = "scan", "c"


class GroupBy(Breaker):
    """group_by(key): always the last node; its terminal is the Grouped's agg (group_plan.py)."""
    __slots__ = ()
    kind, letter = "group_by", "g"


class JoinArg:
    """The other side of a join: the other Query and its key function, read on every call
    like a captured value (a new Query with the same signature reuses the plan)."""
    __slots__ = ("other", "key")

    def __init__(self, other, key):
        self.other = other
        self.key = key


class Join(Breaker):
    """join(other, key, other_key, result) is three nodes: Join(key) (this side's key),
    JoinOther(JoinArg) and JoinResult(result), a select over the (a, b) pair (join_plan.py)."""
    __slots__ = ()
    kind, letter, outer = "join", "J", False


class LeftJoin(Join):
    __slots__ = ()
    kind, letter, outer = "left_join", "L", True


class JoinOther(Op):
    __slots__ = ()
    kind, letter = "join_other", "R"


class JoinResult(Op):
    __slots__ = ()
    kind, letter = "select", "j"


NODES = {cls.letter: cls for cls in (Select, Where, OrderBy, OrderByDescending, ThenBy,
                                     ThenByDescending, Take, Skip, TakeWhile, SkipWhile,
                                     Reverse, Distinct, Scan, GroupBy, Join, LeftJoin, JoinOther,
                                     JoinResult)}
SORTS = "oOtT"                  # the letters of the sort operators
BREAKERS = "oOtTkKaArdcgJL"     # the letters that make a plan staged (stages.py)
FUSED = "swj"                   # the letters fused into a pass (select, where, a join's result)
POSITIONAL = ("last", "element_at", "single")   # terminals planned by stages.py


def staged(letters: str, term) -> bool:
    """Whether a chain + terminal plans as several stages (stages.py) rather than one pass."""
    return term.name in POSITIONAL or any(c in BREAKERS for c in letters)


def chain(letters: str, fns: tuple) -> tuple:
    """The operator nodes of a Query's chain. A Query keeps the chain compact (one letter and
    one function per operator: building a query in a loop makes no node objects); the plan
    and explain() see nodes."""
    return tuple([NODES[letter](fn) for letter, fn in zip(letters, fns)])


def slot_functions(chain_fns: tuple, fns) -> list:
    """Every function of a query, its operators' (a Query's compact chain, in order) first,
    then the terminal's `fns`: the slots, in the order the plan numbers them."""
    return [*chain_fns, *fns]
