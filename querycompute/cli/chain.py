"""Turn the CLI's query text into a Query over placeholder inputs (never executed).

`select(lambda v: v*2).where(lambda v: v > 1000).sum()` is parsed by the frontend
(frontend.parse_chain); the chain's lambdas stay ASTs. Inputs are described by dtype only:
`--dtype float32`, `--input a:float32 --input b:int32` (zip) or `--field price:float32` (table).
"""
from __future__ import annotations

import numpy as np

from ..graph import terminals as T
from ..graph.graph import CLI_OPERATORS
from ..errors import QueryError
from ..frontend import parse_chain
from ..api.query import Query
from ..sources.sources import Source

TERMINALS = ("to_array", "to_list", "sum", "min", "max", "mean", "count", "any", "all", "first",
             "last", "element_at", "single", "aggregate", "agg")
# Pipeline operators (Query methods of those names, taking the parsed arguments as they are):
# the operator nodes that declare `cli` (graph.py).
OPERATORS = CLI_OPERATORS


def _placeholder(dtype: str, n: int) -> np.ndarray:
    # np.empty does not touch the pages: a large n costs nothing, and nothing reads it; but
    # the address space must still be granted.
    if n < 0:
        raise QueryError(f"--n must be >= 0, got {n}")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise QueryError(f"unknown dtype {dtype!r}; use e.g. float32, float64, int32, int64, bool") from None
    try:
        return np.empty(n, dtype=dt)
    except (MemoryError, ValueError):
        raise QueryError(f"--n {n}: a placeholder {dt} input of {n * dt.itemsize:,} bytes can't be "
                         f"allocated on this machine; use a smaller --n (launch shapes scale "
                         f"linearly)") from None


def _pairs(items: list[str], what: str) -> list[tuple[str, str]]:
    out = []
    for item in items:
        name, sep, dt = item.partition(":")
        if not sep or not name.isidentifier():
            raise QueryError(f"{what} {item!r} must look like name:dtype, e.g. price:float32")
        out.append((name, dt))
    return out


def placeholder_source(dtype: str, inputs: list[str], fields: list[str], n: int) -> Source:
    if inputs and fields:
        raise QueryError("give either --input (a zip of arrays) or --field (a table), not both")
    if fields:
        pairs = _pairs(fields, "--field")
        return Source("table", tuple(_placeholder(d, n) for _, d in pairs), tuple(nm for nm, _ in pairs))
    if inputs:
        pairs = _pairs(inputs, "--input")
        kind = "zip" if len(pairs) > 1 else "array"     # qc.query(a) is not a 1-tuple zip
        return Source(kind, tuple(_placeholder(d, n) for _, d in pairs))
    return Source("array", (_placeholder(dtype, n),))


def _spec(arg) -> T.AggSpec:
    """An ("agg_spec", kind, fn-or-None) tuple from the parser -> AggSpec."""
    if isinstance(arg, tuple) and len(arg) == 3 and arg[0] == "agg_spec" and arg[1] == "fold":
        func, seed, associative = arg[2]
        try:
            return T.aggregate(func, seed, associative=associative)
        except TypeError as exc:
            raise QueryError(f"qc.aggregate(...): {exc}") from None
    if isinstance(arg, tuple) and len(arg) == 3 and arg[0] == "agg_spec" and arg[1] in T.AGG_SPEC_KINDS:
        return T.AggSpec(arg[1], arg[2])
    raise QueryError(f"agg(...) takes qc.sum / qc.min / qc.max / qc.mean / qc.count specs, got {arg!r}")


def chain_to_query(text: str, source: Source, backend: str = "auto"):
    """(Query, terminal for source()/explain()) for the CLI's query text."""
    ops = parse_chain(text)
    q = Query(source, (), backend)
    terminal = "to_array"
    for i, (method, args, kwargs) in enumerate(ops):
        if method in ("select", "where"):
            if len(args) != 1 or kwargs:
                raise QueryError(f"{method}() takes exactly one lambda")
            q = q.select(args[0]) if method == "select" else q.where(args[0])
            continue
        if method == "group_by":          # its terminal (agg, count, sum...) aggregates groups
            try:
                q = q.group_by(*args, **kwargs)._query
            except TypeError as exc:
                raise QueryError(f"group_by(): {exc}") from None
            continue
        if method in OPERATORS:
            try:
                q = getattr(q, method)(*args, **kwargs)
            except TypeError as exc:
                raise QueryError(f"{method}(): {exc}") from None
            continue
        if method not in TERMINALS:
            raise QueryError(f"unknown operator {method!r}; use select, where, a pipeline operator "
                             f"({', '.join(OPERATORS)}) or a terminal ({', '.join(TERMINALS)})")
        if i != len(ops) - 1:
            raise QueryError(f"{method}() is a terminal operator and must come last")
        if method == "agg":
            terminal = T.AggBundle(tuple((k, _spec(v)) for k, v in kwargs.items()))
        elif method == "aggregate":
            if len(args) != 2 or set(kwargs) - {"associative"}:
                raise QueryError("aggregate() takes a lambda, a seed and optionally associative=True: "
                                 "aggregate(lambda a, v: a + v, 0)")
            try:
                terminal = T.aggregate(args[0], args[1], associative=kwargs.get("associative", False))
            except TypeError as exc:
                raise QueryError(f"aggregate(): {exc}") from None
        elif method in ("to_array", "to_list"):
            terminal = method
        elif method in ("last", "element_at", "single"):
            terminal = (method, args[0] if args else None)
        else:
            default = kwargs.get("default", T.NO_DEFAULT)
            terminal = T.AggSpec(method, args[0] if args else None, default)
    return q, terminal
