"""`q.group_by(key)`: a `Grouped`, whose terminals aggregate every group (DESIGN.md section 3).

    q.group_by(lambda r: r.account).agg(total=qc.sum(lambda r: r.qty), n=qc.count)
    -> {"key": accounts (ascending), "total": per-account sums, "n": per-account counts}

The result is a `GroupedResult`: a dict of equal-length arrays, one row per group, groups
sorted by key ascending (NaN last): the key columns first (`key` for a single value, `key_0,
key_1, ...` for a tuple, the field names for a dict literal), then one column per named
aggregate; its to_pandas() / to_polars() / to_arrow() give those columns as a table
(results.py), and to_dict() a plain dict.
Groups are aggregated, not materialized: there is no select or where between group_by and
its aggregates; after them, the GroupedResult is queried as a table (a second plan: HAVING,
ORDER BY, LIMIT over the groups). group_plan.py plans it; the backends' group_by
column operation runs it.
"""
from __future__ import annotations

from . import count_distinct as CD
from ..run import engine
from ..graph import terminals as T
from ..errors import QueryError
from ..graph.graph import Terminal
from . import results
from .query import Query, query


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

    def agg(self, **named) -> "GroupedResult":
        """Several aggregates per group in one pass: agg(total=qc.sum(f), n=qc.count, ...)
        with every spec Query.agg takes (qc.count(pred), qc.first(f), qc.any/all(f),
        qc.aggregate(func, seed), qc.count_distinct(f): int64 distinct f per group, as pandas
        nunique(dropna=False); it runs as distinct((key, f)) then a count per key, the others
        in one pass). Returns a GroupedResult (a dict of columns)."""
        specs = T.agg_specs(named)
        if CD.has_distinct_count(specs):
            out = CD.run(self._query, specs)
        else:
            out = engine.run(self._query, Terminal("group_by", specs, standalone=False))
        if not isinstance(out, dict):
            return out                 # (a lazy Dask result: as is)
        return GroupedResult(out, self._query._backend)

    def count_distinct(self, f=None) -> "GroupedResult":
        """Distinct f(element) (or elements) per group: {key..., "count_distinct": int64}."""
        return self.agg(count_distinct=T.count_distinct(f) if f is not None else T.count_distinct)

    def count(self) -> "GroupedResult":
        """Rows per group: {key..., "count": int64 counts}."""
        return self.agg(count=T.count)

    def sum(self, f=None) -> "GroupedResult":
        """Per-group sums of the elements (or f(element)): {key..., "sum": ...}."""
        return self.agg(sum=T.sum(f) if f is not None else T.sum)

    def min(self, f=None) -> "GroupedResult":
        """Per-group minimums (every group has a row, so never empty): {key..., "min": ...}."""
        return self.agg(min=T.min(f) if f is not None else T.min)

    def max(self, f=None) -> "GroupedResult":
        """Per-group maximums: {key..., "max": ...}."""
        return self.agg(max=T.max(f) if f is not None else T.max)

    def mean(self, f=None) -> "GroupedResult":
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
        raise QueryError("where() right after group_by(...) has no groups to filter yet: "
                         "aggregate first, then filter the groups (SQL HAVING): "
                         "q.group_by(k).agg(n=qc.count).where(lambda g: g.n > 2); or filter "
                         "before grouping (q.where(p).group_by(k)...)")

    def select(self, *_):
        raise QueryError("group_by(...).select(...) is not offered: groups are aggregated, not "
                         "materialized; aggregate first (.agg(...), .count(), .sum(f), .min(f), "
                         ".max(f), .mean(f), .count_distinct(f)), then select over the groups: "
                         ".agg(...).select(f)")


class GroupedResult(dict):
    """What group_by(key).agg(...) and its shorthands return: a dict of equal-length arrays,
    key column(s) first, then one per aggregate, one row per group in key order, plus:

        to_dict()     a plain dict of the same arrays
        to_pandas()   a pd.DataFrame, to_polars() a pl.DataFrame, to_arrow() a pa.Table:
                      the same columns, names and order, rows in the same (key) order,
                      dtypes kept; the keys are columns, not an index (results.py)
        query()       a Query over the groups (one record per group, its fields the columns),
                      on the group_by's backend; where (SQL HAVING), select, order_by,
                      order_by_descending, take, skip, distinct, join, left_join and the
                      terminals first, last, count, any, all, to_list chain on from here
                      as on that query. It is a second plan, run after the group_by's own
                      (its explain() says so), not fused into it. As the other side of a
                      join, left_join, intersect_by or except_by it is that query too.

    Example:
        ```python
        sales.group_by(lambda r: r.store).agg(total=qc.sum(lambda r: r.qty), n=qc.count) \
             .where(lambda g: g.n >= 2).order_by_descending(lambda g: g.total).take(3).to_pandas()
        ```
    """
    __slots__ = ("_backend",)
    QUERY_OVER_GROUPS = True           # a join / intersect_by / except_by reads it as .query()

    def __init__(self, columns: dict, backend: str = "auto"):
        super().__init__(columns)
        self._backend = backend

    def to_dict(self) -> dict:
        """The columns as a plain dict (the same arrays, not copies)."""
        return dict(self)

    def to_pandas(self):
        """The groups as a pd.DataFrame: key column(s) then aggregates, rows in key order."""
        return results.to_pandas(self.to_dict())

    def to_polars(self):
        """The groups as a pl.DataFrame: key column(s) then aggregates, rows in key order."""
        return results.to_polars(self.to_dict())

    def to_arrow(self):
        """The groups as a pa.Table: key column(s) then aggregates, rows in key order."""
        return results.to_arrow(self.to_dict())

    def query(self) -> Query:
        """A Query over the groups: one record per group (fields: the key and aggregate
        columns), in key order, on the backend the group_by ran on. A second plan: the groups
        are the computed columns, read as a table source (explain() says so)."""
        q = query(self.to_dict())
        q._source.origin = ("the groups of a group_by result, as a table: a second plan, "
                            "run after the group_by's own (not fused into it)")
        return q if self._backend == "auto" else q.on(self._backend)


def _over_groups(name: str):
    """GroupedResult.<name>: the Query method `name` on self.query()."""
    def method(self, *args, **kwargs):
        return getattr(self.query(), name)(*args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"self.query().{name}(...): Query.{name} over the groups (one record per "
                      f"group; a second plan, see query()).")
    return method


for _name in ("where", "select", "order_by", "order_by_descending", "take", "skip", "distinct",
              "join", "left_join", "first", "last", "count", "any", "all", "to_list"):
    setattr(GroupedResult, _name, _over_groups(_name))


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
