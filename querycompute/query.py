"""The fluent, lazy `Query`: sources, select/where/on, terminal operators, introspection.

A Query is immutable: every lazy operator returns a new one sharing the source, so a query can
be reused and extended. Nothing is read or compiled until a terminal operator runs
(see engine.py for that path).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import engine
from . import terminals as T
from .backends import registry
from .errors import QueryError
from .graph import PLAIN, WITH_FN, Count, JoinArg, ScanArg, Terminal, chain
from .sources import NATIVE_DTYPES, Source, from_args, from_range, plain_columns, validated

_TERMINAL_NAMES = ("to_array", "to_list", "sum", "min", "max", "mean", "count", "any", "all", "first",
                   "last", "element_at", "single")


class Query:
    __slots__ = ("_source", "_ops", "_backend", "_kinds", "_codes", "_hot")

    def __init__(self, source: Source, ops: tuple = (), backend: str = "auto", kinds: str = "",
                 codes: tuple = ()):
        self._source = source
        self._ops = ops            # each operator's function, in order (nodes(): the graph)
        self._backend = backend
        # Built as the chain grows, for the warm-path signature (engine.run): each node's
        # letter, and each function's code object (a parsed text lambda stands for itself).
        self._kinds = kinds
        self._codes = codes
        self._hot = None           # warm.Hot: the last terminal run, ready to repeat
                                   # (False: ran once; engine._remember)

    def __array__(self, dtype=None, copy=None):
        """`np.asarray(q)` is `q.to_array()` (runs the query); queries whose elements are
        tuples or records give several arrays, so for them it is a TypeError."""
        out = self.to_array()
        if not isinstance(out, np.ndarray):
            raise TypeError(f"np.asarray(query): the query's elements are "
                            f"{'records' if isinstance(out, dict) else 'tuples'}, which make "
                            f"several arrays; call .to_array() (a "
                            f"{type(out).__name__} of arrays) instead")
        return out if dtype is None else out.astype(dtype, copy=False)

    def __repr__(self) -> str:
        chain = "".join(f".{op.kind}(...)" for op in self.nodes())
        return f"<Query {self._source.kind}{chain} on {self._backend}>"

    # -- lazy operators ---------------------------------------------------------------------
    # (select and where spell out the new Query themselves: a chain written inline in a loop
    # builds one per operator per call, so a helper call shows in small-n timings)
    def select(self, f) -> "Query":
        """Map every element with f (scalar, tuple or dict-literal record result)."""
        code = getattr(f, "__code__", None)
        if code is None:
            f = code = _text_lambda("select", f)
        return Query(self._source, self._ops + (f,), self._backend, self._kinds + "s",
                     self._codes + (code,))

    def where(self, pred) -> "Query":
        """Keep the elements for which pred is true; order is preserved."""
        code = getattr(pred, "__code__", None)
        if code is None:
            pred = code = _text_lambda("where", pred)
        return Query(self._source, self._ops + (pred,), self._backend, self._kinds + "w",
                     self._codes + (code,))

    # -- pipeline operators (each ends a fused stage: stages.py, DESIGN.md section 5b) --------
    def _then(self, letter: str, arg, code) -> "Query":
        return Query(self._source, self._ops + (arg,), self._backend, self._kinds + letter,
                     self._codes + (code,))

    def _keyed(self, letter: str, what: str, key) -> "Query":
        if key is None:
            return self._then(letter, None, None)
        code = getattr(key, "__code__", None)
        if code is None:
            key = code = _text_lambda(what, key)
        return self._then(letter, key, code)

    def order_by(self, key=None) -> "Query":
        """Stable sort by key(element) ascending (key=None: the element); NaN keys last,
        -0.0 == 0.0; a tuple key sorts by its items in turn."""
        return self._keyed("o", "order_by", key)

    def order_by_descending(self, key=None) -> "Query":
        """Stable sort by key descending; NaN keys still last."""
        return self._keyed("O", "order_by_descending", key)

    def then_by(self, key) -> "Query":
        """A further sort key for rows whose earlier keys are equal (after order_by)."""
        self._after_sort("then_by")
        return self._keyed("t", "then_by", key)

    def then_by_descending(self, key) -> "Query":
        self._after_sort("then_by_descending")
        return self._keyed("T", "then_by_descending", key)

    def _after_sort(self, what: str) -> None:
        if not self._kinds or self._kinds[-1] not in "oOtT":
            raise QueryError(f"{what}() must follow order_by(), order_by_descending() or another "
                             f"then_by(); to sort by several keys use order_by(k1).{what}(k2)")

    def take(self, n) -> "Query":
        """The first n elements (all of them when fewer; none when n <= 0). n is read on
        every run, like a captured value: a new n never recompiles."""
        return self._then("k", Count(_count(n, "take")), "count")

    def skip(self, n) -> "Query":
        """All but the first n elements."""
        return self._then("K", Count(_count(n, "skip")), "count")

    def take_while(self, pred) -> "Query":
        """Elements up to (not including) the first for which pred is false."""
        return self._keyed("a", "take_while", _required(pred, "take_while"))

    def skip_while(self, pred) -> "Query":
        """Elements from the first for which pred is false on."""
        return self._keyed("A", "skip_while", _required(pred, "skip_while"))

    def reverse(self) -> "Query":
        return self._then("r", None, None)

    def distinct(self, key=None) -> "Query":
        """The first element of each distinct key (key=None: the element), in order; all
        NaNs are one value and -0.0 == 0.0."""
        return self._keyed("d", "distinct", key)

    def scan(self, func, seed) -> "Query":
        """The inclusive running fold: element i becomes func(..func(seed, x0).., xi); func
        associative (not necessarily commutative), as for aggregate()."""
        code = getattr(_required(func, "scan"), "__code__", None)
        if code is None:
            func = code = _text_lambda("scan", func)
        if not isinstance(seed, (bool, int, float, np.generic)):
            raise TypeError(f"scan() seed must be a number, got {type(seed).__name__}")
        return self._then("c", ScanArg(func, seed), (code, type(seed), repr(seed)))

    def join(self, other: "Query", key, other_key, result) -> "Query":
        """Inner equi-join (LINQ's Join): result(a, b) for every pair of this query's element a
        and other's element b with key(a) == other_key(b); this query's order, then other's
        order among the matches."""
        return self._join("J", other, key, other_key, result)

    def left_join(self, other: "Query", key, other_key, result) -> "Query":
        """Like join, but every element of this query is kept: where nothing matches, b's
        fields are NaN (floats), 0 (integers) or False (bools)."""
        return self._join("L", other, key, other_key, result)

    def _join(self, letter: str, other, key, other_key, result) -> "Query":
        what = "join" if letter == "J" else "left_join"
        if not isinstance(other, Query):
            raise TypeError(f"{what}() joins another Query (qc.query(...)), got {type(other).__name__}")
        for fn, name in ((key, "key"), (other_key, "other_key"), (result, "result")):
            _required(fn, f"{what}() {name}")
        other_sig = (other._source.kind, other._source.fields, other._kinds, other._codes,
                     tuple(str(c.dtype) for c in other._source.columns()), getattr(other_key, "__code__", other_key))
        q = self._keyed(letter, what, key)
        q = q._then("R", JoinArg(other, other_key), other_sig)
        return q._keyed("j", what, result)

    def group_by(self, key):
        """Groups of equal key(element) (a value, a tuple or a dict literal): a Grouped, whose
        agg(...) / count() / sum(f) / ... give one row per group, sorted by key."""
        from .grouped import Grouped
        return Grouped(self._keyed("g", "group_by", _required(key, "group_by")))

    def nodes(self) -> tuple:
        """The operation graph's operator nodes after the source (graph.Select, ...)."""
        return chain(self._kinds, self._ops)

    def on(self, backend: str) -> "Query":
        """Pin a backend: "auto", "numpy", "cpu", "cuda", "opencl" or "metal"."""
        if backend != "auto" and backend not in registry.NAMES:
            raise QueryError(f"unknown backend {backend!r}; choose one of: auto, {', '.join(registry.NAMES)}")
        return Query(self._source, self._ops, backend, self._kinds, self._codes)

    # -- terminal operators -----------------------------------------------------------------
    def _run(self, name: str, f=None, default=T.NO_DEFAULT):
        if default is T.NO_DEFAULT:    # shared requests: the warm path allocates none
            if f is None:
                return engine.run(self, PLAIN[name], ())
            return engine.run(self, WITH_FN[name], (f,))
        return engine.run(self, Terminal(name, ((name, T.AggSpec(name, f, default)),)))

    def to_array(self):
        """Elements as an array (tuple of arrays for tuples, dict of arrays for records)."""
        return self._run("to_array")

    def to_list(self) -> list:
        return self._run("to_list")

    def sum(self, f=None):
        return self._run("sum", f)

    def min(self, f=None, *, default=T.NO_DEFAULT):
        return self._run("min", f, default)

    def max(self, f=None, *, default=T.NO_DEFAULT):
        return self._run("max", f, default)

    def mean(self, f=None, *, default=T.NO_DEFAULT):
        return self._run("mean", f, default)

    def count(self, pred=None) -> int:
        return self._run("count", pred)

    def any(self, pred=None) -> bool:
        return self._run("any", pred)

    def all(self, pred=None) -> bool:
        return self._run("all", pred)

    def first(self, pred=None, *, default=T.NO_DEFAULT):
        return self._run("first", pred, default)

    def last(self, pred=None, *, default=T.NO_DEFAULT):
        """The last element (for which pred is true)."""
        return engine.run(self, positional("last", pred, default))

    def element_at(self, i, *, default=T.NO_DEFAULT):
        """The element at position i (0-based; i is read on every run: no recompile)."""
        return engine.run(self, positional("element_at", Count(_count(i, "element_at")), default))

    def single(self, pred=None, *, default=T.NO_DEFAULT):
        """The one element (for which pred is true): EmptySequenceError when there is none
        (unless default= is given), MultipleElementsError when there are several."""
        return engine.run(self, positional("single", pred, default))

    def aggregate(self, func, seed):
        """LINQ's fold func(...func(func(seed, x0), x1)..., xn): func associative, maybe not
        commutative (element order is kept); seed applied once; no element -> seed."""
        if not callable(func) and not hasattr(func, "body") and not isinstance(func, str):
            raise TypeError(f"aggregate() takes a function func(acc, v), got {type(func).__name__}")
        return engine.run(self, Terminal("aggregate", (("aggregate", T.AggSpec("fold", func, seed=seed)),)))

    def agg(self, **named) -> dict:
        """Several aggregates in one pass: q.agg(total=qc.sum, peak=qc.max, n=qc.count)."""
        key = tuple(named.items())
        req = _AGG_REQUESTS.get(key)
        if req is None:
            specs = _agg_specs(named)
            shared = all(spec.fn is None for _, spec in specs)
            req = Terminal("agg", specs, standalone=False, shared=shared)
            if shared:
                _AGG_REQUESTS[key] = req        # qc.sum, qc.max...: long-lived, reusable
        return engine.run(self, req)

    # -- compiled queries ---------------------------------------------------------------------
    def compile(self, terminal: Any = "to_array", *, tiered: bool | None = None):
        """The plan and kernels of `terminal` for this query, made explicit: a CompiledQuery.

        `terminal` is a terminal's name ("sum", "count", "to_array", ...), an aggregate spec
        (`qc.sum(lambda v: v * v)`, `qc.min(default=0)`) or `qc.agg(...)`. Calling the result
        runs the terminal with the arrays' and captured values' current contents. `tiered`
        (default: QUERYCOMPUTE_TIERED, on): the numpy tier answers while the kernel compiles
        in the background; tiered=False compiles here, raising CompileError if it fails."""
        from .compiled import CompiledQuery
        from .introspect import terminal_request
        term = terminal_request(terminal)
        return CompiledQuery(self, term, term.fns, terminal, tiered)

    # -- introspection ----------------------------------------------------------------------
    def lowered(self, terminal: Any = "to_array"):
        """The fused plan for `terminal` (no compile, no run). Used by source() and explain()."""
        from .introspect import lower_for
        return lower_for(self, terminal)

    def source(self, backend: str = "cuda", terminal: Any = "to_array") -> str:
        """Every kernel of the plan in `backend`'s dialect; needs no device."""
        from .introspect import source
        return source(self, backend, terminal)

    def explain(self, backend: str | None = None, terminal: Any = "to_array") -> str:
        """The operation graph, the fused plan, launch shapes and bytes moved per element."""
        from .introspect import explain
        return explain(self, backend, terminal)


def _count(n, what: str) -> int:
    """take / skip / element_at's n: an integer (numpy integers too; not a bool or float)."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{what}() takes an integer, got {type(n).__name__} {n!r}")
    return int(n)


def _required(fn, what: str):
    if fn is None:
        raise TypeError(f"{what}() needs a function (a lambda)")
    return fn


def positional(name: str, arg, default) -> Terminal:
    """last / element_at / single: planned by stages.py (the spec's fn is the predicate, or
    element_at's Count)."""
    if arg is not None and not isinstance(arg, Count) and getattr(arg, "__code__", None) is None:
        arg = _text_lambda(name, arg)
    return Terminal(name, ((name, T.AggSpec(name, arg, default)),))     # (kind: for the empty error)


def _text_lambda(kind: str, fn):
    """A chain operator's argument that is not a Python function: a lambda given as text
    (`select("lambda v: v * 2")`, parsed, never executed), already parsed (the CLI), or a
    supported ufunc / builtin (`select(np.sqrt)`: frontend/known_callables.py) stands for its
    own code object; another callable is an UnsupportedLambdaError, a non-callable a TypeError."""
    if not isinstance(fn, str) and not callable(fn) and not hasattr(fn, "body"):
        raise TypeError(f"{kind}() takes a function (a lambda, a lambda as text or a supported "
                        f"NumPy ufunc / builtin such as np.sqrt or abs), got {type(fn).__name__}")
    from .frontend.known_callables import function_source
    return function_source(fn)


# agg(...) requests made only of function-less specs (module-level qc.sum, qc.max...), by
# (name, spec object) pairs: the warm path builds nothing for them.
_AGG_REQUESTS: dict[tuple, Terminal] = {}


def _agg_specs(named: dict) -> tuple:
    if not named:
        raise TypeError("agg() needs at least one named aggregate, e.g. q.agg(total=qc.sum)")
    out = []
    for key, spec in named.items():
        if not isinstance(spec, T.AggSpec) or spec.kind not in T.AGG_SPEC_KINDS:
            raise TypeError(f"agg({key}=...) must be qc.sum, qc.min, qc.max, qc.mean, qc.count, "
                            f"qc.first, qc.any, qc.all (optionally called with a function) or "
                            f"qc.aggregate(func, seed), got {spec!r}")
        out.append((key, spec))
    return tuple(out)


def query(*arrays, **columns) -> Query:
    """qc.query(x) / qc.query(a, b) / qc.query(table) / qc.query(price=p, qty=q)."""
    if len(arrays) == 1 and not columns:
        x = arrays[0]
        if type(x) is np.ndarray and x.ndim == 1 and x.dtype in NATIVE_DTYPES:
            return Query(Source("array", arrays))      # the common case, checked cheaply
        if type(x) is dict and x:                     # a table of plain arrays, likewise
            names, cols = tuple(x), tuple(x.values())
            if plain_columns(cols) and all([type(k) is str and k.isidentifier() for k in names]):
                return Query(Source("table", cols, names))
    elif arrays and not columns and plain_columns(arrays):
        return Query(Source("zip", arrays))            # plain 1-D arrays of one length
    return Query(validated(from_args(arrays, columns)))


def range(start, stop=None, step=1) -> Query:  # noqa: A001  (mirrors Python's range)
    """int64 indexes: qc.range(stop) or qc.range(start, stop, step=1)."""
    return Query(from_range(start, stop, step))
