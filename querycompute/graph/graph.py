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
                         TakeWhile / SkipWhile(pred), Reverse(), Distinct(key), Scan(func, seed),
                         Join / LeftJoin(key) + JoinOther + JoinResult, SemiJoin / AntiJoin(key)
                         + JoinOther (intersect_by / except_by)
Terminal nodes:          Terminal(name, specs): to_array / to_list, or aggregates given as
                         (result key, AggSpec) pairs (sum, count(pred), agg(...), aggregate);
                         last / element_at / single (positional: planned by stages.py).

An operator is one object: its node class declares everything the other layers ask of it
(the class attributes of `Op`: whether it breaks a stage, which planner step plans it, whether
it reads its input many times, what its function's record parameter is, how Dask distributes
it). No other module keeps a table of operators: a Query keeps each operator's node class
(its signature) beside its function, and the layers below ask the class. Adding an operator means a node class here, its planner step (plan/stages.py,
named by `stage`), its stage kind's run (plan/stage_kinds.py, calling a StageRuntime method)
and its op module (docs/architecture.md, "Adding an operator").
"""
from __future__ import annotations

from . import terminals as T
from ..errors import InputTypeError
from ..frontend.known_callables import function_source


class Op:
    """An operator node: `kind` names it (the Query method), `fn` is the user's function (a lambda, a def, or a lambda parsed from
    text). The class attributes below are what the planner, column pruning, `auto` and Dask
    read of an operator."""
    __slots__ = ("fn",)
    kind = "?"
    breaks_stage = False      # ends the fused stage before it (DESIGN.md section 5b)
    stage: str | None = None  # the planner step that plans it (plan/stages.py: plan_<stage>)
    sorts = False             # order_by / then_by: its function is a sort key
    then = False              # then_by: a further key of the sort before it
    heavy = False             # reads its input many times (sort, hash, join): worth a GPU
    makes_element = False     # its result is a new element (select, scan, a join's result)
    same_length = False       # as many elements out as in (select, scan, reverse, sorts)
    element_key = False       # with no function, the whole element is its key (order_by, distinct)
    record_param: int | None = None   # which parameter of its function is the record
    other_side = False        # the other query of a join (columns of its own source)
    dask: str | None = None   # Dask: "operator" (dask/operators.py cuts the chain there),
                              # "last" (group_by: the chain's end), None: not distributed
    cli = False               # a pipeline operator the CLI's query text accepts

    def __init__(self, fn):
        self.fn = fn

    def __repr__(self) -> str:
        return f"{self.kind}(...)"


class Select(Op):
    __slots__ = ()
    kind = "select"
    makes_element = same_length = True


class Where(Op):
    __slots__ = ()
    kind = "where"


class Terminal:
    """A terminal node. `specs` holds (result key, AggSpec) pairs; `signature` is what of it
    changes the compiled pass (not defaults). `fns` are the functions the specs carry; a shared
    terminal (made once, reused by every call: PLAIN / WITH_FN below) carries T.PER_CALL
    instead and each call passes its own functions."""
    __slots__ = ("name", "specs", "standalone", "fns", "signature", "shared", "codes")

    def __init__(self, name: str, specs: tuple = (), standalone: bool = True, shared: bool = False,
                 codes: bool = False):
        self.name = name
        self.specs = specs
        self.standalone = standalone
        self.shared = shared
        self.codes = codes          # string result columns stay Encoded (codes + dictionary)
        self.fns = tuple([s.fn for _, s in specs if s.fn is not None and s.fn is not T.PER_CALL])
        self.signature = (name, standalone,
                          tuple([(s.kind, s.fn is not None, type(s.seed), s.seed, s.associative)
                                 for _, s in specs]))

    def __repr__(self) -> str:
        return f"Terminal({self.name})"


# Shared terminals: every terminal called without a default, with no function (PLAIN) or with
# one given per call (WITH_FN: q.count(lambda v: ...)). The warm path allocates none.
PLAIN = {name: Terminal(name, shared=True) for name in ("to_array", "to_list")}
# to_array whose string columns stay this call's codes and dictionaries (string_columns.Encoded),
# not decoded to Python str: a join's other side, which the join encodes again (join_plan)
CODED = Terminal("to_array", shared=True, codes=True)
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
    breaks_stage = True
    cli = True


class OrderBy(Breaker):
    __slots__ = ()
    kind, descending = "order_by", False
    stage, sorts, heavy, element_key, same_length, dask = "sort", True, True, True, True, "operator"


class OrderByDescending(Breaker):
    __slots__ = ()
    kind, descending = "order_by_descending", True
    stage, sorts, heavy, element_key, same_length, dask = "sort", True, True, True, True, "operator"


class ThenBy(Breaker):
    __slots__ = ()
    kind, descending = "then_by", False
    sorts, then, heavy, same_length, dask = True, True, True, True, "operator"


class ThenByDescending(Breaker):
    __slots__ = ()
    kind, descending = "then_by_descending", True
    sorts, then, heavy, same_length, dask = True, True, True, True, "operator"


class Take(Breaker):
    __slots__ = ()
    kind = "take"
    stage, dask = "window", "operator"


class Skip(Breaker):
    __slots__ = ()
    kind = "skip"
    stage, dask = "window", "operator"


class TakeWhile(Breaker):
    __slots__ = ()
    kind = "take_while"
    stage, dask = "take_while", "operator"


class SkipWhile(Breaker):
    __slots__ = ()
    kind = "skip_while"
    stage, dask = "take_while", "operator"


class Reverse(Breaker):
    __slots__ = ()
    kind = "reverse"
    stage, same_length = "reverse", True


class Distinct(Breaker):
    __slots__ = ()
    kind = "distinct"
    stage, heavy, element_key, dask = "distinct", True, True, "operator"


class Scan(Breaker):
    __slots__ = ()
    kind = "scan"
    stage, makes_element, same_length, record_param, dask = "scan", True, True, -1, "operator"


class GroupBy(Breaker):
    """group_by(key): always the last node; its terminal is the Grouped's agg (group_plan.py)."""
    __slots__ = ()
    kind = "group_by"
    stage, heavy, dask, cli = "group", True, "last", False


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
    kind, outer = "join", False
    stage, heavy, cli = "join", True, False


class LeftJoin(Join):
    __slots__ = ()
    kind, outer = "left_join", True


class SemiJoin(Breaker):
    """intersect_by(other, key, other_key) is two nodes: SemiJoin(key) (this side's key) and
    JoinOther(JoinArg); the elements pass through unchanged, those whose key occurs among the
    other's keys kept in order (join_plan.plan_semi_join)."""
    __slots__ = ()
    kind, anti = "intersect_by", False
    stage, heavy, cli = "semi_join", True, False


class AntiJoin(SemiJoin):
    """except_by(other, key, other_key): those whose key does not occur."""
    __slots__ = ()
    kind, anti = "except_by", True


class JoinOther(Op):
    __slots__ = ()
    kind = "join_other"
    other_side = True


class JoinResult(Op):
    __slots__ = ()
    kind = "select"
    makes_element, same_length, record_param = True, True, 0


# Every operator node class (the CLI's operators and the tests read it).
OPERATORS = (Select, Where, OrderBy, OrderByDescending, ThenBy, ThenByDescending, Take, Skip,
             TakeWhile, SkipWhile, Reverse, Distinct, Scan, GroupBy, Join, LeftJoin, JoinOther,
             JoinResult, SemiJoin, AntiJoin)
POSITIONAL = ("last", "element_at", "single")   # terminals planned by stages.py


def staged(kinds: tuple, term) -> bool:
    """Whether a chain (its node classes) + terminal plans as several stages (stages.py)
    rather than one pass."""
    return term.name in POSITIONAL or any(c.breaks_stage for c in kinds)


def heavy(kinds: tuple) -> bool:
    """Whether a chain reads its input many times (a sort, distinct, group_by or join): what
    makes a host array worth copying to a GPU (registry.choose_auto's `heavy`), and what the
    numpy tier answers only for small inputs (tiers.NUMPY_TIER_MAX_HEAVY)."""
    return any(c.heavy for c in kinds)


def first_breaker(kinds: tuple) -> int:
    """Index of a chain's first pipeline operator (a trailing group_by, which ends the chain
    like a terminal, is not one), or -1."""
    last = len(kinds) - 1
    for i, c in enumerate(kinds):
        if c.breaks_stage and not (c.dask == "last" and i == last):
            return i
    return -1


# The pipeline operators the CLI's query text accepts (Query methods of these names).
CLI_OPERATORS = tuple(dict.fromkeys(cls.kind for cls in OPERATORS if cls.cli))


class Chain:
    """A chain as the layers below the API run it: the source, each operator's function (its
    argument), the backend, and, for the warm-path signature, each operator's node class and
    each function's code object (a parsed text lambda stands for itself). `Query` (api/query.py) is
    a Chain with the operator and terminal methods; the runners that split a chain (Dask's
    chunks and operator groups, streaming's chunks) build Chains of its parts, and the engine
    runs any Chain (engine.run(chain, terminal)). Immutable: `_then` makes a new one of the
    same class; `_hot` is the engine's (warm.Hot: the last terminal run, ready to repeat)."""
    __slots__ = ("_source", "_ops", "_backend", "_kinds", "_codes", "_hot")

    def __init__(self, source, ops: tuple = (), backend: str = "auto", kinds: tuple = (),
                 codes: tuple = ()):
        self._source = source
        self._ops = ops            # each operator's function, in order (nodes(): the graph)
        self._backend = backend
        # Built as the chain grows, for the warm-path signature (engine.run): each node's
        # class (graph.Select, ...), and each function's code object (a parsed text lambda stands for itself).
        self._kinds = kinds
        self._codes = codes
        self._hot = None           # warm.Hot: the last terminal run, ready to repeat
                                   # (False: ran once; engine._remember)

    def nodes(self) -> tuple:
        """The operation graph's operator nodes after the source (graph.Select, ...)."""
        return chain(self._kinds, self._ops)

    def _then(self, node: type, arg, code):
        """This chain with operator `node` (a node class) appended: its class, its argument,
        and what of the argument is part of the signature."""
        return type(self)(self._source, self._ops + (arg,), self._backend,
                          self._kinds + (node,), self._codes + (code,))

    def _keyed(self, node: type, key, what: str | None = None):
        """`_then` with a function argument (None, a function, or what text_lambda reads)."""
        if key is None:
            return self._then(node, None, None)
        code = getattr(key, "__code__", None)
        if code is None:
            key = code = text_lambda(what or node.kind, key)
        return self._then(node, key, code)


def text_lambda(kind: str, fn):
    """A chain operator's argument that is not a Python function: a lambda given as text
    (`select("lambda v: v * 2")`, parsed, never executed), already parsed (the CLI), or a
    supported ufunc / builtin (`select(np.sqrt)`: frontend/known_callables.py) stands for its
    own code object; another callable is an UnsupportedLambdaError, a non-callable a TypeError."""
    if not isinstance(fn, str) and not callable(fn) and not hasattr(fn, "body"):
        raise InputTypeError(f"{kind}() takes a function (a lambda, a lambda as text or a supported "
                             f"NumPy ufunc / builtin such as np.sqrt or abs), got {type(fn).__name__}")
    return function_source(fn)


def positional(name: str, arg, default) -> Terminal:
    """last / element_at / single: planned by stages.py (the spec's fn is the predicate, or
    element_at's Count)."""
    if arg is not None and not isinstance(arg, Count) and getattr(arg, "__code__", None) is None:
        arg = text_lambda(name, arg)
    return Terminal(name, ((name, T.AggSpec(name, arg, default)),))     # (kind: for the empty error)


def chain(kinds: tuple, fns: tuple) -> tuple:
    """The operator nodes of a Query's chain. A Query keeps the chain compact (each operator's
    node class and its function: building a query in a loop makes no node instances); the
    plan and explain() see nodes."""
    return tuple([cls(fn) for cls, fn in zip(kinds, fns)])


def slot_functions(chain_fns: tuple, fns) -> list:
    """Every function of a query, its operators' (a Query's compact chain, in order) first,
    then the terminal's `fns`: the slots, in the order the plan numbers them."""
    return [*chain_fns, *fns]
