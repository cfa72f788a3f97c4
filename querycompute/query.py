"""The fluent, lazy `Query`: sources, select/where/on, terminal operators, introspection.

A Query is immutable: every lazy operator returns a new one sharing the source, so a query can
be reused and extended. Nothing is read or compiled until a terminal operator runs
(see engine.py for that path).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import engine
from . import terminals as T
from .backends import registry
from .errors import QueryError
from .dask_source import from_dask, wants_dask
from .graph import PLAIN, WITH_FN, Count, JoinArg, ScanArg, Terminal, chain
from .sources import NATIVE_DTYPES, Source, from_args, from_range, plain_columns, validated

if TYPE_CHECKING:
    from .compiled import CompiledQuery
    from .grouped import Grouped

_TERMINAL_NAMES = ("to_array", "to_list", "sum", "min", "max", "mean", "count", "any", "all", "first",
                   "last", "element_at", "single")


class Query:
    """A lazy, immutable query over arrays: operators return new Queries, terminals run.

    Build one with `qc.query(...)` or `qc.range(...)`; chain lazy operators (select, where,
    order_by, take, distinct, scan, join, group_by, ...); a terminal (to_array, sum, min,
    max, mean, count, any, all, first, last, element_at, single, aggregate, agg) plans,
    compiles (once per signature, cached in memory and on disk) and runs the whole chain as
    fused kernels on the query's backend. Semantics are NumPy 2's. `repr(q)` shows the
    source, dtypes, n and each lambda's text.

    Example:
        ```python
        import numpy as np
        import querycompute as qc

        x = np.arange(1_000_000, dtype=np.float32)
        qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000).sum()
        ```
    """
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
        """Source kind, columns' dtypes, n, each operator with its lambda's text, backend."""
        from .query_repr import text
        return text(self)

    def _repr_html_(self) -> str:
        """The same as repr(), as an HTML table for notebooks."""
        from .query_repr import html_table
        return html_table(self)

    # -- lazy operators ---------------------------------------------------------------------
    # (select and where spell out the new Query themselves: a chain written inline in a loop
    # builds one per operator per call, so a helper call shows in small-n timings)
    def select(self, f) -> "Query":
        """Map every element with `f`.

        Args:
            f: A lambda (or a lambda as text, a supported NumPy ufunc / builtin) of one element;
                it may return a scalar, a tuple or a dict literal (a record).

        Returns:
            A new lazy Query whose elements are f(element); nothing runs until a terminal.
            An empty input stays empty.

        Example:
            ```python
            qc.query(x).select(lambda v: v * 2).to_array()
            ```
        """
        code = getattr(f, "__code__", None)
        if code is None:
            f = code = _text_lambda("select", f)
        return Query(self._source, self._ops + (f,), self._backend, self._kinds + "s",
                     self._codes + (code,))

    def where(self, pred) -> "Query":
        """Keep the elements for which `pred` is true, in their order.

        Args:
            pred: A lambda of one element returning a bool.

        Returns:
            A new lazy Query; empty when no element passes (then e.g. `sum()` is 0).

        Example:
            ```python
            qc.query(x).where(lambda v: v > 0).count()
            ```
        """
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
        """Stable sort by `key(element)`, ascending.

        NaN keys sort last and -0.0 == 0.0 (NumPy's order); a tuple key sorts by its items in turn.

        Args:
            key: A lambda of one element, or None to sort by the element itself.

        Returns:
            A new lazy Query; an empty input stays empty.

        Example:
            ```python
            qc.query(price=p, qty=q).order_by(lambda r: r.price).take(10).to_array()
            ```
        """
        return self._keyed("o", "order_by", key)

    def order_by_descending(self, key=None) -> "Query":
        """Stable sort by `key(element)`, descending; NaN keys still last.

        Args:
            key: A lambda of one element, or None to sort by the element itself.

        Returns:
            A new lazy Query; an empty input stays empty.

        Example:
            ```python
            qc.query(x).order_by_descending().take(3).to_list()
            ```
        """
        return self._keyed("O", "order_by_descending", key)

    def then_by(self, key) -> "Query":
        """A further ascending sort key for elements whose earlier keys are equal.

        Args:
            key: A lambda of one element.

        Returns:
            A new lazy Query.

        Raises:
            QueryError: Unless it follows order_by, order_by_descending or another then_by.

        Example:
            ```python
            qc.query(a=a, b=b).order_by(lambda r: r.a).then_by(lambda r: r.b).to_array()
            ```
        """
        self._after_sort("then_by")
        return self._keyed("t", "then_by", key)

    def then_by_descending(self, key) -> "Query":
        """A further descending sort key for elements whose earlier keys are equal.

        Args:
            key: A lambda of one element.

        Returns:
            A new lazy Query.

        Raises:
            QueryError: Unless it follows order_by, order_by_descending or another then_by.

        Example:
            ```python
            qc.query(a=a, b=b).order_by(lambda r: r.a).then_by_descending(lambda r: r.b).to_array()
            ```
        """
        self._after_sort("then_by_descending")
        return self._keyed("T", "then_by_descending", key)

    def _after_sort(self, what: str) -> None:
        if not self._kinds or self._kinds[-1] not in "oOtT":
            raise QueryError(f"{what}() must follow order_by(), order_by_descending() or another "
                             f"then_by(); to sort by several keys use order_by(k1).{what}(k2)")

    def take(self, n) -> "Query":
        """The first `n` elements (all of them when there are fewer; none when n <= 0).

        `n` is read on every run, like a captured value: a new n never recompiles.

        Args:
            n: An integer (a Python or NumPy integer; not a bool or float).

        Returns:
            A new lazy Query.

        Example:
            ```python
            qc.query(x).where(lambda v: v > 0).take(5).to_list()
            ```
        """
        return self._then("k", Count(_count(n, "take")), "count")

    def skip(self, n) -> "Query":
        """All but the first `n` elements (none when there are fewer; all when n <= 0).

        Args:
            n: An integer, read on every run (no recompile).

        Returns:
            A new lazy Query.

        Example:
            ```python
            qc.query(x).skip(10).sum()
            ```
        """
        return self._then("K", Count(_count(n, "skip")), "count")

    def take_while(self, pred) -> "Query":
        """The elements up to (not including) the first for which `pred` is false.

        Args:
            pred: A lambda of one element returning a bool.

        Returns:
            A new lazy Query; empty when the first element fails `pred` or the input is empty.

        Example:
            ```python
            qc.query(x).take_while(lambda v: v < 100).count()
            ```
        """
        return self._keyed("a", "take_while", _required(pred, "take_while"))

    def skip_while(self, pred) -> "Query":
        """The elements from the first for which `pred` is false on.

        Args:
            pred: A lambda of one element returning a bool.

        Returns:
            A new lazy Query; empty when every element passes `pred`.

        Example:
            ```python
            qc.query(x).skip_while(lambda v: v < 100).to_array()
            ```
        """
        return self._keyed("A", "skip_while", _required(pred, "skip_while"))

    def reverse(self) -> "Query":
        """The elements in reverse order.

        Returns:
            A new lazy Query; an empty input stays empty.

        Example:
            ```python
            qc.query(x).reverse().first()
            ```
        """
        return self._then("r", None, None)

    def distinct(self, key=None) -> "Query":
        """The first element of each distinct key, in input order.

        All NaNs are one value and -0.0 == 0.0.

        Args:
            key: A lambda of one element, or None for the element itself.

        Returns:
            A new lazy Query; an empty input stays empty.

        Example:
            ```python
            qc.query(x).distinct().count()
            ```
        """
        return self._keyed("d", "distinct", key)

    def scan(self, func, seed) -> "Query":
        """The inclusive running fold: element i becomes func(..func(seed, x0).., xi).

        Args:
            func: A lambda func(acc, v), associative (not necessarily commutative), as for
                aggregate().
            seed: A number; compiled into the kernel (a new seed makes a new signature).

        Returns:
            A new lazy Query of the running values; an empty input stays empty.

        Raises:
            TypeError: When `seed` is not a number.

        Example:
            ```python
            qc.query(x).scan(lambda a, v: a + v, 0).to_array()     # np.cumsum(x)
            ```
        """
        code = getattr(_required(func, "scan"), "__code__", None)
        if code is None:
            func = code = _text_lambda("scan", func)
        if not isinstance(seed, (bool, int, float, np.generic)):
            raise TypeError(f"scan() seed must be a number, got {type(seed).__name__}")
        return self._then("c", ScanArg(func, seed), (code, type(seed), repr(seed)))

    def join(self, other: "Query", key, other_key, result) -> "Query":
        """Inner equi-join (LINQ's Join).

        Args:
            other: The other Query.
            key: A lambda of this query's element.
            other_key: A lambda of other's element.
            result: A lambda result(a, b) of a matching pair.

        Returns:
            A new lazy Query of result(a, b) for every pair with key(a) == other_key(b), in this
            query's order, then other's order among the matches; empty when nothing matches.

        Example:
            ```python
            qc.query(orders).join(qc.query(users), lambda o: o.uid, lambda u: u.id,
                                  lambda o, u: o.amount * u.rate).sum()
            ```
        """
        return self._join("J", other, key, other_key, result)

    def left_join(self, other: "Query", key, other_key, result) -> "Query":
        """Like join, but every element of this query is kept.

        Where nothing matches, b's fields are NaN (floats), 0 (integers) or False (bools).

        Args:
            other: The other Query.
            key: A lambda of this query's element.
            other_key: A lambda of other's element.
            result: A lambda result(a, b).

        Returns:
            A new lazy Query with at least one element per element of this query.

        Example:
            ```python
            qc.query(orders).left_join(qc.query(users), lambda o: o.uid, lambda u: u.id,
                                       lambda o, u: u.rate).to_array()
            ```
        """
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

    def group_by(self, key) -> "Grouped":
        """Groups of equal key(element), aggregated by the returned Grouped's terminals.

        Args:
            key: A lambda of one element returning a value, a tuple or a dict literal.

        Returns:
            A Grouped: its agg(...), count(), sum(f), min(f), max(f), mean(f) give a dict of
            columns, one row per group, sorted by key (no rows for an empty input).

        Example:
            ```python
            qc.query(account=a, qty=q).group_by(lambda r: r.account).agg(total=qc.sum(lambda r: r.qty))
            ```
        """
        from .grouped import Grouped
        return Grouped(self._keyed("g", "group_by", _required(key, "group_by")))

    def nodes(self) -> tuple:
        """The operation graph's operator nodes after the source (graph.Select, ...)."""
        return chain(self._kinds, self._ops)

    def on(self, backend: str) -> "Query":
        """Pin a backend for this query.

        Args:
            backend: "auto" (the default: cpu, or a real GPU for large inputs), "numpy", "cpu",
                "cuda", "opencl", "webgpu" or "metal".

        Returns:
            A new Query with the same chain on `backend`.

        Raises:
            QueryError: For an unknown backend name.

        Example:
            ```python
            qc.query(x).on("numpy").sum()
            ```
        """
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

    def to_array(self, *, compute=True) -> "np.ndarray | tuple | dict":
        """Run the query and return its elements.

        Returns:
            A NumPy array (scalar elements), a tuple of arrays (tuple elements) or a dict of arrays
            (record elements). An empty result is an empty array of the element dtype.

        Example:
            ```python
            qc.query(x).select(lambda v: v * 2).to_array()
            ```
        """
        return (self if compute is True else _uncomputed(self, compute))._run("to_array")

    def to_list(self, *, compute=True) -> list:
        """Run the query and return its elements as a Python list (empty for no element).

        Example:
            ```python
            qc.query(x).take(3).to_list()
            ```
        """
        return (self if compute is True else _uncomputed(self, compute))._run("to_list")

    def sum(self, f=None, *, compute=True) -> np.generic:
        """The sum of the elements (or of f(element)), NumPy's dtype rules.

        Args:
            f: Optional lambda applied to each element first.

        Returns:
            A NumPy scalar; 0 of the result dtype for an empty sequence.

        Example:
            ```python
            qc.query(x).sum(lambda v: v * v)
            ```
        """
        return (self if compute is True else _uncomputed(self, compute))._run("sum", f)

    def min(self, f=None, *, default=T.NO_DEFAULT, compute=True) -> Any:
        """The smallest element (or f(element)); NaN if any value is NaN (as np.min).

        Args:
            f: Optional lambda applied to each element first.
            default: Returned for an empty sequence.

        Returns:
            A NumPy scalar, or `default`.

        Raises:
            EmptySequenceError: For an empty sequence without `default=`.

        Example:
            ```python
            qc.query(x).where(lambda v: v > 0).min(default=0)
            ```
        """
        return (self if compute is True else _uncomputed(self, compute))._run("min", f, default)

    def max(self, f=None, *, default=T.NO_DEFAULT, compute=True) -> Any:
        """The largest element (or f(element)); NaN if any value is NaN (as np.max).

        Args:
            f: Optional lambda applied to each element first.
            default: Returned for an empty sequence.

        Returns:
            A NumPy scalar, or `default`.

        Raises:
            EmptySequenceError: For an empty sequence without `default=`.

        Example:
            ```python
            qc.query(x).max(lambda v: abs(v))
            ```
        """
        return (self if compute is True else _uncomputed(self, compute))._run("max", f, default)

    def mean(self, f=None, *, default=T.NO_DEFAULT, compute=True) -> Any:
        """The arithmetic mean of the elements (or f(element)), as np.mean.

        Args:
            f: Optional lambda applied to each element first.
            default: Returned for an empty sequence.

        Returns:
            A NumPy scalar, or `default`.

        Raises:
            EmptySequenceError: For an empty sequence without `default=`.

        Example:
            ```python
            qc.query(x).mean()
            ```
        """
        return (self if compute is True else _uncomputed(self, compute))._run("mean", f, default)

    def count(self, pred=None, *, compute=True) -> int:
        """How many elements there are (for which `pred` is true).

        Args:
            pred: Optional lambda of one element returning a bool.

        Returns:
            An int; 0 for an empty sequence.

        Example:
            ```python
            qc.query(x).count(lambda v: v > 0)
            ```
        """
        return (self if compute is True else _uncomputed(self, compute))._run("count", pred)

    def any(self, pred=None, *, compute=True) -> bool:
        """Whether some element exists (for which `pred` is true); stops at the first.

        Args:
            pred: Optional lambda of one element returning a bool.

        Returns:
            A bool; False for an empty sequence.

        Example:
            ```python
            qc.query(x).any(lambda v: v < 0)
            ```
        """
        return (self if compute is True else _uncomputed(self, compute))._run("any", pred)

    def all(self, pred=None, *, compute=True) -> bool:
        """Whether `pred` is true for every element (every element is truthy without pred).

        Args:
            pred: Optional lambda of one element returning a bool.

        Returns:
            A bool; True for an empty sequence.

        Example:
            ```python
            qc.query(x).all(lambda v: v >= 0)
            ```
        """
        return (self if compute is True else _uncomputed(self, compute))._run("all", pred)

    def first(self, pred=None, *, default=T.NO_DEFAULT, compute=True) -> Any:
        """The first element (for which `pred` is true); stops there.

        Args:
            pred: Optional lambda of one element returning a bool.
            default: Returned when there is no such element.

        Returns:
            The element: a NumPy scalar, a tuple or a dict, or `default`.

        Raises:
            EmptySequenceError: When there is none and no `default=`.

        Example:
            ```python
            qc.query(x).first(lambda v: v > 100, default=None)
            ```
        """
        return (self if compute is True else _uncomputed(self, compute))._run("first", pred, default)

    def last(self, pred=None, *, default=T.NO_DEFAULT, compute=True) -> Any:
        """The last element (for which `pred` is true).

        Args:
            pred: Optional lambda of one element returning a bool.
            default: Returned when there is no such element.

        Returns:
            The element, or `default`.

        Raises:
            EmptySequenceError: When there is none and no `default=`.

        Example:
            ```python
            qc.query(x).last(lambda v: v > 100, default=None)
            ```
        """
        return engine.run(self if compute is True else _uncomputed(self, compute), positional("last", pred, default))

    def element_at(self, i, *, default=T.NO_DEFAULT) -> Any:
        """The element at position `i` (0-based; i < 0 finds none).

        `i` is read on every run: a new i never recompiles.

        Args:
            i: An integer position.
            default: Returned when there is no element at `i`.

        Returns:
            The element, or `default`.

        Raises:
            EmptySequenceError: When there is no element at `i` and no `default=`.

        Example:
            ```python
            qc.query(x).where(lambda v: v > 0).element_at(2)
            ```
        """
        return engine.run(self, positional("element_at", Count(_count(i, "element_at")), default))

    def single(self, pred=None, *, default=T.NO_DEFAULT, compute=True) -> Any:
        """The one element (for which `pred` is true).

        Args:
            pred: Optional lambda of one element returning a bool.
            default: Returned when there is none.

        Returns:
            The element, or `default`.

        Raises:
            EmptySequenceError: When there is none and no `default=`.
            MultipleElementsError: When there are several.

        Example:
            ```python
            qc.query(ids).single(lambda v: v == 42)
            ```
        """
        return engine.run(self if compute is True else _uncomputed(self, compute), positional("single", pred, default))

    def aggregate(self, func, seed, *, compute=True) -> Any:
        """LINQ's fold func(...func(func(seed, x0), x1)..., xn).

        Args:
            func: A lambda func(acc, v), associative, maybe not commutative (element order is
                kept).
            seed: The start value, applied once.

        Returns:
            The folded value; `seed` for an empty sequence.

        Example:
            ```python
            qc.query(x).aggregate(lambda a, v: max(a, v * v), 0.0)
            ```
        """
        if not callable(func) and not hasattr(func, "body") and not isinstance(func, str):
            raise TypeError(f"aggregate() takes a function func(acc, v), got {type(func).__name__}")
        q = self if compute is True else _uncomputed(self, compute)
        return engine.run(q, Terminal("aggregate", (("aggregate", T.AggSpec("fold", func, seed=seed)),)))

    def agg(self, *, compute=True, **named) -> dict:
        """Several aggregates in one pass over the data.

        Args:
            **named: name=spec, each spec qc.sum, qc.min, qc.max, qc.mean, qc.count, qc.first,
                qc.any, qc.all (optionally called with a lambda or default=) or
                qc.aggregate(func, seed).

        Returns:
            A dict name -> value, each following its terminal's empty-input rule.

        Example:
            ```python
            qc.query(x).agg(total=qc.sum, peak=qc.max, n=qc.count(lambda v: v > 0))
            ```
        """
        key = tuple(named.items())
        req = _AGG_REQUESTS.get(key)
        if req is None:
            specs = _agg_specs(named)
            shared = all(spec.fn is None for _, spec in specs)
            req = Terminal("agg", specs, standalone=False, shared=shared)
            if shared:
                _AGG_REQUESTS[key] = req        # qc.sum, qc.max...: long-lived, reusable
        return engine.run(self if compute is True else _uncomputed(self, compute), req)

    # -- compiled queries ---------------------------------------------------------------------
    def compile(self, terminal: Any = "to_array", *, tiered: bool | None = None) -> "CompiledQuery":
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


def _uncomputed(q: Query, compute) -> Query:
    """A terminal's `compute=False`: the same query over Dask inputs whose terminal returns the
    Dask object (a Delayed, or Dask arrays) instead of its value (dask_run.lazy). Refused for
    in-memory inputs: nothing there is deferred (the terminal would run now anyway)."""
    if compute is not False:
        raise TypeError(f"compute= takes True or False, got {compute!r}")
    from .dask_run import lazy
    return lazy(q)


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


def query(*arrays, chunks=None, **columns) -> Query:
    """Start a query over host or device data.

    Args:
        *arrays: One 1-D array (or anything np.asarray accepts, a pandas Series, a CuPy
            array), several of one length (elements are tuples), or one table (a dict of
            arrays, a pandas/polars DataFrame, a NumPy structured array, a pyarrow Table):
            elements are records, `r.price`.
        chunks: Read in-memory or memory-mapped inputs through Dask, this many elements
            per chunk (out-of-core); Dask arrays / dataframes always run per chunk.
        **columns: Named 1-D arrays of one length: a table.

    Returns:
        A lazy Query; nothing is read or compiled until a terminal runs.

    Raises:
        TypeError: For an input that can't be read as columns (e.g. nulls, 2-D arrays);
            the message says what to do instead.

    Example:
        ```python
        qc.query(price=p, qty=q).where(lambda r: r.qty > 0).sum(lambda r: r.price * r.qty)
        ```
    """
    if chunks is not None:
        return Query(from_dask(arrays, columns, chunks))
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
    if wants_dask(arrays, columns):
        return Query(from_dask(arrays, columns, chunks))
    return Query(validated(from_args(arrays, columns)))


def range(start, stop=None, step=1) -> Query:  # noqa: A001  (mirrors Python's range)
    """A query over int64 indexes, like Python's range (no array is allocated).

    Args:
        start: The first index, or the stop when it is the only argument.
        stop: One past the last index.
        step: The distance between indexes (not 0).

    Returns:
        A lazy Query of int64 elements; empty when the range is.

    Example:
        ```python
        qc.range(1, 1001).select(lambda i: 1.0 / (i * i)).sum()
        ```
    """
    return Query(from_range(start, stop, step))
