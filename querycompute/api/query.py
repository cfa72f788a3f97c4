"""The fluent, lazy `Query`: sources and the operators that build a chain (select, where,
the pipeline operators, join, group_by, on); its terminals and introspection are in
query_terminals.py.

A Query is immutable: every lazy operator returns a new one sharing the source, so a query can
be reused and extended. Nothing is read or compiled until a terminal operator runs
(see engine.py for that path).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..backends import registry
from ..errors import QueryError
from ..dask.source import from_dask, wants_dask
from ..graph import graph as G
from ..graph.graph import Chain, Count, JoinArg, ScanArg, text_lambda
from .query_terminals import count_arg, required
from ..graph import terminals as T
from .query_terminals import QueryTerminals
from ..sources.sources import NATIVE_DTYPES, Source, from_args, from_range, plain_columns, validated

if TYPE_CHECKING:
    from .grouped import Grouped


_SELECT, _WHERE = (G.Select,), (G.Where,)     # (the warm path: no call for these)


class Query(QueryTerminals, Chain):
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
    __slots__ = ()      # a Chain (graph.py): source, operators, backend, signature parts

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
            f = code = text_lambda("select", f)
        return Query(self._source, self._ops + (f,), self._backend, self._kinds + _SELECT,
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
            pred = code = text_lambda("where", pred)
        return Query(self._source, self._ops + (pred,), self._backend, self._kinds + _WHERE,
                     self._codes + (code,))

    # -- pipeline operators (each ends a fused stage: stages.py, DESIGN.md section 5b) --------
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
        return self._keyed(G.OrderBy, key)

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
        return self._keyed(G.OrderByDescending, key)

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
        return self._keyed(G.ThenBy, key)

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
        return self._keyed(G.ThenByDescending, key)

    def _after_sort(self, what: str) -> None:
        if not self._kinds or not self._kinds[-1].sorts:
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
        return self._then(G.Take, Count(count_arg(n, "take")), "count")

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
        return self._then(G.Skip, Count(count_arg(n, "skip")), "count")

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
        return self._keyed(G.TakeWhile, required(pred, "take_while"))

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
        return self._keyed(G.SkipWhile, required(pred, "skip_while"))

    def reverse(self) -> "Query":
        """The elements in reverse order.

        Returns:
            A new lazy Query; an empty input stays empty.

        Example:
            ```python
            qc.query(x).reverse().first()
            ```
        """
        return self._then(G.Reverse, None, None)

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
        return self._keyed(G.Distinct, key)

    def scan(self, func, seed, *, associative: bool = False) -> "Query":
        """The inclusive running fold: element i becomes func(..func(seed, x0).., xi).

        Args:
            func: A lambda func(acc, v), as for aggregate(): one the compiler cannot prove
                associative runs in element order (cpu, numpy; refused on GPU backends).
            seed: A number; compiled into the kernel (a new seed makes a new signature).
            associative: True states that func is associative (the parallel scan runs on
                every backend); the compiler trusts it.

        Returns:
            A new lazy Query of the running values; an empty input stays empty.

        Raises:
            TypeError: When `seed` is not a number.

        Example:
            ```python
            qc.query(x).scan(lambda a, v: a + v, 0).to_array()     # np.cumsum(x)
            ```
        """
        code = getattr(required(func, "scan"), "__code__", None)
        if code is None:
            func = code = text_lambda("scan", func)
        if not isinstance(seed, (bool, int, float, np.generic)):
            raise TypeError(f"scan() seed must be a number, got {type(seed).__name__}")
        associative = T.check_associative(associative)
        return self._then(G.Scan, ScanArg(func, seed, associative), (code, type(seed), repr(seed), associative))

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
        return self._join(G.Join, other, key, other_key, result)

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
        return self._join(G.LeftJoin, other, key, other_key, result)

    def intersect_by(self, other: "Query", key, other_key) -> "Query":
        """The elements whose key occurs among other's keys (a semi-join: SQL `EXISTS` /
        `IN (subquery)`; .NET's IntersectBy, by key).

        Elements pass through unchanged, in this query's order; this query's duplicates are
        all kept and duplicates in other never duplicate an element. Keys are compared as
        join's are: after conversion to their common type, all NaNs one value, -0.0 == 0.0.

        Args:
            other: The other Query (its element columns are never read, only its keys).
            key: A lambda of this query's element: one value or a tuple of values.
            other_key: A lambda of other's element, of the same arity.

        Returns:
            A new lazy Query of this query's elements.

        Example:
            ```python
            qc.query(orders).intersect_by(qc.query(users).where(lambda u: u.rate > 1),
                                          lambda o: o.uid, lambda u: u.id).count()
            ```
        """
        return self._other(G.SemiJoin, other, key, other_key)

    def except_by(self, other: "Query", key, other_key) -> "Query":
        """The elements whose key does not occur among other's keys (an anti-join: SQL
        `NOT EXISTS`; .NET's ExceptBy, by key, but this query's duplicates are kept).

        Args:
            other: The other Query.
            key: A lambda of this query's element: one value or a tuple of values.
            other_key: A lambda of other's element, of the same arity.

        Returns:
            A new lazy Query of this query's elements, in order (intersect_by's complement).

        Example:
            ```python
            qc.query(orders).except_by(qc.query(users), lambda o: o.uid, lambda u: u.id).to_array()
            ```
        """
        return self._other(G.AntiJoin, other, key, other_key)

    def _join(self, node: type, other, key, other_key, result) -> "Query":
        q = self._other(node, other, key, other_key)
        return q._keyed(G.JoinResult, required(result, f"{node.kind}() result"), node.kind)

    def _other(self, node: type, other, key, other_key) -> "Query":
        """This query, then `node` (this side's key) and the other side's JoinOther node."""
        what = node.kind
        if getattr(type(other), "QUERY_OVER_GROUPS", False):
            other = other.query()      # a group_by's result (api/grouped.GroupedResult): its groups
        if not isinstance(other, Query):
            raise TypeError(f"{what}() takes another Query as `other` (qc.query(...)), got "
                            f"{type(other).__name__}; wrap it: q.{what}(qc.query(other), key, other_key"
                            f"{', result' if node.stage == 'join' else ''})")
        for fn, name in ((key, "key"), (other_key, "other_key")):
            required(fn, f"{what}() {name}")
        other_sig = (other._source.kind, other._source.fields, other._kinds, other._codes,
                     other._source.dtypes(other._source.columns()), getattr(other_key, "__code__", other_key))
        q = self._keyed(node, key)
        return q._then(G.JoinOther, JoinArg(other, other_key), other_sig)

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
        return Grouped(self._keyed(G.GroupBy, required(key, "group_by")))

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
