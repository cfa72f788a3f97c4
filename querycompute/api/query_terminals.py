"""A Query's terminal operators (they run it), its compile() and its introspection
(source, explain, lowered): the half of `Query` that ends a chain. query.py holds the half
that builds one; `Query` is both.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..run import engine
from ..graph import terminals as T
from ..errors import InputTypeError
from ..graph.graph import CODED, PLAIN, WITH_FN, Count, Terminal, positional, text_lambda
from . import count_distinct as CD
from . import results

if TYPE_CHECKING:
    from ..run.compiled import CompiledQuery



# ---- checks of an operator's arguments (shared with query.py) -------------------------------
# Checks of a query operator's arguments, shared by the operators (query.py) and the
# terminals (query_terminals.py): counts, required functions, functions given as text or as a
# supported ufunc / builtin.
def count_arg(n, what: str) -> int:
    """take / skip / element_at's n: an integer (numpy integers too; not a bool or float)."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise InputTypeError(f"{what}() takes an integer, got {type(n).__name__} {n!r}")
    # Clamped to int64: no sequence reaches 2**63 elements, so take/skip/element_at of a
    # larger n (or below -2**63) mean the same as of the bound (element_at: the default).
    return min(max(int(n), -2 ** 63), 2 ** 63 - 1)


def required(fn, what: str):
    if fn is None:
        raise InputTypeError(f"{what}() needs a function (a lambda)")
    return fn


class QueryTerminals:
    """The terminal operators of `Query` (see query.py): each runs the query now."""

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

    def _to_codes(self):
        """to_array() with string columns left as this call's codes and dictionaries
        (string_columns.Encoded): a join's other side, which the join encodes anyway."""
        return engine.run(self, CODED, ())

    def to_list(self, *, compute=True) -> list:
        """Run the query and return its elements as a Python list (empty for no element).

        Example:
            ```python
            qc.query(x).take(3).to_list()
            ```
        """
        return (self if compute is True else _uncomputed(self, compute))._run("to_list")

    def to_pandas(self) -> "pandas.DataFrame | pandas.Series":
        """Run the query and return its elements as pandas objects (pandas must be installed).

        Returns:
            A pd.DataFrame for record elements and tables (columns named as the fields, in
            their order) and for tuple elements (columns "0", "1", ...: the position, as a
            string); a pd.Series (unnamed) for scalar elements. Dtypes are to_array()'s (int32
            stays int32, bool stays bool, NaN stays NaN); an empty result keeps its columns and
            dtypes. Over Dask inputs the result is computed (to_array() stays lazy).

        Example:
            ```python
            qc.query(df).where(lambda r: r.qty > 0).to_pandas()
            ```
        """
        return results.to_pandas(self._run("to_array"))

    def to_polars(self) -> "polars.DataFrame | polars.Series":
        """Run the query and return its elements as polars objects (polars must be installed).

        Returns:
            A pl.DataFrame (records, tables, tuples: columns named as to_pandas() names them)
            or a pl.Series named "" (scalar elements). Dtypes kept, NaN stays NaN (not null);
            datetime64 units polars lacks ("s" and coarser, but dates) become "ms". An empty
            result keeps its columns and dtypes. Over Dask inputs the result is computed.

        Example:
            ```python
            qc.query(df).select(lambda r: {"total": r.qty * r.price}).to_polars()
            ```
        """
        return results.to_polars(self._run("to_array"))

    def to_arrow(self) -> "pyarrow.Table | pyarrow.Array":
        """Run the query and return its elements as Arrow data (pyarrow must be installed).

        Returns:
            A pa.Table (records, tables, tuples: columns named as to_pandas() names them) or a
            pa.Array (scalar elements). Dtypes kept (float16 is halffloat; NaN stays a value,
            never a null). An empty result keeps its columns and types. Over Dask inputs the
            result is computed.

        Example:
            ```python
            qc.query(table).where(lambda r: r.qty > 0).to_arrow()
            ```
        """
        return results.to_arrow(self._run("to_array"))

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
            EmptySequenceError: When there is no element at `i` and no `default=` (an
                `ElementIndexError`, also an IndexError as `seq[i]` raises).

        Example:
            ```python
            qc.query(x).where(lambda v: v > 0).element_at(2)
            ```
        """
        return engine.run(self, positional("element_at", Count(count_arg(i, "element_at")), default))

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

    def count_distinct(self, f=None, *, compute=True) -> np.int64:
        """How many distinct elements (or distinct f(element)) there are: SQL
        COUNT(DISTINCT f), polars n_unique.

        Equality is distinct()'s: all NaNs are one value and -0.0 == 0.0, so it equals
        `len(q.distinct(f).to_array())` (pandas `nunique(dropna=False)`). It runs as
        `q.distinct(f).count()` on every backend (cpu: hash sets of the keys' bits).

        Args:
            f: Optional lambda of one element; a tuple-valued f counts distinct tuples.

        Returns:
            An int64; 0 for an empty sequence.

        Example:
            ```python
            qc.query(x).count_distinct(lambda v: v % 7)
            ```
        """
        q = self if compute is True else _uncomputed(self, compute)
        n = q.distinct(f).count()
        return np.int64(n) if compute is True else n

    def aggregate(self, func, seed, *, associative: bool = False, compute=True) -> Any:
        """LINQ's fold func(...func(func(seed, x0), x1)..., xn).

        Args:
            func: A lambda func(acc, v). One the compiler proves associative (+ * min max
                & | ^, keep last / first, ...: _codegen/associative.py) folds as a parallel
                tree keeping element order; any other runs as an in-order fold (cpu,
                numpy), refused on GPU backends and Dask (FoldOrderError).
            seed: The start value, applied once.
            associative: True states that func is associative: the parallel tree runs on
                every backend (the compiler trusts it).

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
        spec = T.AggSpec("fold", func, seed=seed, associative=T.check_associative(associative))
        return engine.run(q, Terminal("aggregate", (("aggregate", spec),)))

    def agg(self, *, compute=True, **named) -> dict:
        """Several aggregates in one pass over the data.

        Args:
            **named: name=spec, each spec qc.sum, qc.min, qc.max, qc.mean, qc.count, qc.first,
                qc.any, qc.all (optionally called with a lambda or default=),
                qc.aggregate(func, seed) or qc.count_distinct(f) (an int64; it runs as
                its own distinct(f).count(), the others in one pass).

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
            specs = T.agg_specs(named)
            if CD.has_distinct_count(specs):
                return CD.run(self if compute is True else _uncomputed(self, compute), specs,
                              lazy=compute is not True)
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
        from ..run.compiled import CompiledQuery
        from .introspect import terminal_request
        found = CD.terminal_parts(self, terminal)
        if found is not None:
            return CD.compiled(self, found, tiered)
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
        found = CD.terminal_parts(self, terminal)
        if found is not None:
            return CD.source(self, backend, found)
        return source(self, backend, terminal)

    def explain(self, backend: str | None = None, terminal: Any = "to_array") -> str:
        """The operation graph, the fused plan, launch shapes and bytes moved per element."""
        from .introspect import explain
        found = CD.terminal_parts(self, terminal)
        if found is not None:
            return CD.explain(self, backend, found)
        return explain(self, backend, terminal)


def _uncomputed(q: "QueryTerminals", compute) -> "QueryTerminals":
    """A terminal's `compute=False`: the same query over Dask inputs whose terminal returns the
    Dask object (a Delayed, or Dask arrays) instead of its value (dask_run.lazy). Refused for
    in-memory inputs: nothing there is deferred (the terminal would run now anyway)."""
    if compute is not False:
        raise TypeError(f"compute= takes True or False, got {compute!r}")
    from ..dask.run import lazy
    return lazy(q)


# agg(...) requests made only of function-less specs (module-level qc.sum, qc.max...), by
# (name, spec object) pairs: the warm path builds nothing for them.
_AGG_REQUESTS: dict[tuple, Terminal] = {}


