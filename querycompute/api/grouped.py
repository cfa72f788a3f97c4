"""`q.group_by(key)`: a `Grouped`, whose terminals aggregate every group (DESIGN.md section 3).

    q.group_by(lambda r: r.account).agg(total=qc.sum(lambda r: r.qty), n=qc.count)
    -> {"key": accounts (ascending), "total": per-account sums, "n": per-account counts}

The result is a dict of equal-length arrays, one row per group, groups sorted by key
ascending (NaN last): the key columns first (`key` for a single value, `key_0, key_1, ...`
for a tuple, the field names for a dict literal), then one column per named aggregate.
Groups are aggregated, not materialized: there is no select or where after group_by (filter
the result, or filter before grouping). group_plan.py plans it; the backends' group_by
column operation runs it.
"""
from __future__ import annotations

from . import count_distinct as CD
from ..run import engine
from ..graph import terminals as T
from ..errors import QueryError
from ..graph.graph import Terminal


class Grouped:
    """The groups of `q.group_by(key)`; each terminal aggregates every group in one pass.

    Every terminal returns a dict of equal-length arrays: the key column(s) first, then one
    column per aggregate, one row per group, sorted by key (NaN last). An empty input gives
    empty columns.

    Example:
        ```python
        qc.query(account=a, qty=q).group_by(lambda r: r.account).agg(
            total=qc.sum(lambda r: r.qty), n=qc.count)
        ```
    """
    __slots__ = ("_query",)

    def __init__(self, query):
        self._query = query            # the Query whose last node is the GroupBy

    def __repr__(self) -> str:
        return f"<Grouped {self._query!r}>"

    def agg(self, **named) -> dict:
        """Several aggregates per group in one pass: agg(total=qc.sum(f), n=qc.count, ...)
        with every spec Query.agg takes (qc.first(f), qc.any/all(f), qc.aggregate(func, seed),
        qc.count_distinct(f): int64 distinct f per group, as pandas nunique(dropna=False); it
        runs as distinct((key, f)) then a count per key, the others in one pass)."""
        specs = T.agg_specs(named)
        if CD.has_distinct_count(specs):
            return CD.run(self._query, specs)
        return engine.run(self._query, Terminal("group_by", specs, standalone=False))

    def count_distinct(self, f=None) -> dict:
        """Distinct f(element) (or elements) per group: {key..., "count_distinct": int64}."""
        return self.agg(count_distinct=T.count_distinct(f) if f is not None else T.count_distinct)

    def count(self) -> dict:
        """Rows per group: {key..., "count": int64 counts}."""
        return self.agg(count=T.count)

    def sum(self, f=None) -> dict:
        """Per-group sums of the elements (or f(element)): {key..., "sum": ...}."""
        return self.agg(sum=T.sum(f) if f is not None else T.sum)

    def min(self, f=None) -> dict:
        """Per-group minimums (every group has a row, so never empty): {key..., "min": ...}."""
        return self.agg(min=T.min(f) if f is not None else T.min)

    def max(self, f=None) -> dict:
        """Per-group maximums: {key..., "max": ...}."""
        return self.agg(max=T.max(f) if f is not None else T.max)

    def mean(self, f=None) -> dict:
        """Per-group means: {key..., "mean": ...}."""
        return self.agg(mean=T.mean(f) if f is not None else T.mean)

    def explain(self, backend: str | None = None, terminal=None, **named) -> str:
        """The plan of agg(**named) (default: count) without running it; `terminal=` as
        Query.explain takes it: qc.agg(...), a spec (qc.sum(f)) or a shorthand's name."""
        return self._query.explain(backend, _bundle(terminal, named))

    def source(self, backend: str = "cuda", terminal=None, **named) -> str:
        """The kernel source of agg(**named) (default: count) in `backend`'s dialect;
        `terminal=` as for explain()."""
        return self._query.source(backend, _bundle(terminal, named))

    def where(self, *_):
        raise QueryError("where() after group_by is not supported: filter before grouping "
                         "(q.where(p).group_by(k)...), or filter the result dict")

    def select(self, *_):
        raise QueryError("group_by(...).select(...) is not offered: groups are aggregated, not "
                         "materialized; use .agg(...), .count(), .sum(f), .min(f), .max(f), .mean(f), "
                         ".count_distinct(f)")


_SHORTHANDS = {"count": T.count, "sum": T.sum, "min": T.min, "max": T.max, "mean": T.mean,
               "count_distinct": T.count_distinct}


def _bundle(terminal, named: dict) -> T.AggBundle:
    """explain()/source()'s aggregates: **named, or terminal= as Query.source takes one
    (DESIGN.md section 3: a name, a spec or qc.agg(...)), named as the terminal names them."""
    if terminal is None:
        return T.AggBundle(T.agg_specs(named or {"count": T.count}))
    if named:
        raise TypeError("give the aggregates either as terminal= or as name=spec, not both")
    if isinstance(terminal, T.AggBundle):
        return terminal
    if isinstance(terminal, str) and terminal in _SHORTHANDS:
        return T.AggBundle(((terminal, _SHORTHANDS[terminal]),))
    if isinstance(terminal, T.AggSpec):
        return T.AggBundle(T.agg_specs({terminal.kind: terminal}))
    raise TypeError(f"a group_by's terminal is one of {', '.join(_SHORTHANDS)}, a spec such as "
                    f"qc.sum(f) or qc.agg(...), got {terminal!r}")
