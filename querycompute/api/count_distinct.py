"""Distinct counts (DESIGN.md section 3): SQL COUNT(DISTINCT f), polars n_unique.

    q.count_distinct(f)                          -> q.distinct(f).count()
    q.agg(n=qc.count_distinct(f), s=qc.sum)      -> q.agg(s=qc.sum) and q.distinct(f).count()
    q.group_by(k).agg(n=qc.count_distinct(f), s=qc.sum)
        -> q.group_by(k).agg(s=qc.sum) and q.distinct((k, f)).group_by(k).count()

A distinct count is not a reduction of one pass: it runs as the query's own distinct, so its
equality is distinct()'s (all NaNs one value, -0.0 == 0.0; a tuple-valued f counts distinct
tuples) and every backend runs it with its distinct machinery (cpu: per-partition hash sets
of the keys' order bits when they fit one or two 64-bit words, else a radix sort; GPU runtimes: their
radix sort's first-occurrence flags; numpy: the stable sort; Dask: per-chunk distinct sets
merged, then counted). Per group, the distinct key is the pair (group key, f) and the count
is a count per group: every group has at least one distinct pair, so the count column's rows
are the groups of the other aggregates, in the same (sorted) order. An agg holding other
aggregates runs them in one pass as before, and each distinct count as its own run;
qc.last_trace() then holds every run's kernels, each named after its part, and explain()
prints each part's plan.
"""
from __future__ import annotations

import types
from typing import Any

import numpy as np

from ..errors import QueryError
from ..frontend.capture import lambda_source
from ..frontend.key_pairs import key_and_value
from ..frontend.known_callables import function_source
from ..graph import graph as G
from ..graph import terminals as T
from ..graph.graph import Terminal
from ..run import engine

KIND = "count_distinct"


def has_distinct_count(specs) -> bool:
    return any(spec.kind == KIND for _, spec in specs)


def _grouped(q) -> bool:
    return q._kinds[-1:] == (G.GroupBy,)


def parts(q, specs: tuple) -> list:
    """What an agg with distinct counts runs, in order: (label, query, Terminal) per part,
    the other aggregates first (one part, if any), then one part per distinct count."""
    grouped = _grouped(q)
    others = tuple((k, s) for k, s in specs if s.kind != KIND)
    out = []
    if others:
        out.append(("agg", q, Terminal("group_by" if grouped else "agg", others, standalone=False),
                    "the other aggregates in one pass"))
    for name, spec in specs:
        if spec.kind != KIND:
            continue
        if grouped:
            key = q._ops[-1]
            base = type(q)(q._source, q._ops[:-1], q._backend, q._kinds[:-1], q._codes[:-1])
            pair = key_and_value(key, spec.fn)
            part = base.distinct(pair)._keyed(G.GroupBy, key)
            out.append((name, part, Terminal("group_by", ((name, T.count),), standalone=False),
                        f"{name}: count_distinct({_text(spec.fn)}) runs as distinct((key, f)) with "
                        f"key = {_text(key)}, then a count per key"))
        else:
            out.append((name, q.distinct(spec.fn), T.AggSpec("count"),
                        f"{name}: count_distinct({_text(spec.fn)}) runs as distinct(f).count()"))
    return out


def _text(fn) -> str:
    """A function's text as the user wrote it (the element itself for None)."""
    if fn is None:
        return "the element itself"
    if type(fn) is types.FunctionType:
        return lambda_source(fn).text
    return function_source(fn).text


def run(q, specs: tuple, lazy: bool = False) -> Any:
    """Run an agg (grouped when q ends with its group_by) holding distinct counts; `lazy`: q
    is a Dask query whose terminals return Dask objects (compute=False), combined in a
    Delayed."""
    ran, traces = [], []
    for label, part, term, _ in parts(q, specs):
        if isinstance(term, T.AggSpec):            # ungrouped: q.distinct(f).count()
            ran.append(part.count())
        else:
            ran.append(engine.run(part, term))
        if not lazy:
            traces.append((label, engine.last_trace()))
    if len(traces) > 1:
        engine.combine_traces(traces, "group_by" if _grouped(q) else "agg")
    names = tuple(k for k, _ in specs)
    if lazy:
        import dask                                # (Dask inputs only: compute=False)
        return dask.delayed(_assemble)(names, _grouped(q), tuple(ran))
    return _assemble(names, _grouped(q), tuple(ran))


def _assemble(names: tuple, grouped: bool, ran: tuple) -> dict:
    """The agg's dict from its parts' results: the key columns (grouped) from the first part,
    then each named aggregate in the order given."""
    got: dict = {}
    for r in ran:
        if isinstance(r, dict):
            got.update(r)
    out: dict = {}
    if grouped:
        first = ran[0]
        out.update((k, v) for k, v in first.items() if k not in names)
    counts = iter(r for r in ran if not isinstance(r, dict))
    for name in names:
        out[name] = got[name] if name in got else np.int64(next(counts))
    return out


def terminal_parts(q, terminal: Any) -> list | None:
    """The parts a terminal given to explain() / source() / compile() runs as, or None when
    it holds no distinct count: "count_distinct", qc.count_distinct(f), or qc.agg(...) / a
    group_by's aggregates holding one."""
    if isinstance(terminal, str) and terminal == KIND:
        terminal = T.count_distinct
    if isinstance(terminal, T.AggSpec) and terminal.kind == KIND:
        specs = ((KIND, terminal),)
    elif isinstance(terminal, T.AggBundle) and has_distinct_count(terminal.specs):
        specs = terminal.specs
    else:
        return None
    return parts(q, specs)


def _header(runs: str, what: str) -> str:
    return f"=== part {what}: {runs} ==="


def explain(q, backend, found: list) -> str:
    out = [f"count_distinct: not a reduction of one pass; it runs as the query's own distinct "
           f"(distinct()'s equality: all NaNs one value, -0.0 == 0.0), then a count"
           f"{' per group' if _grouped(q) else ''}: {len(found)} part{'s' * (len(found) > 1)}, run in turn"]
    for i, (label, part, term, runs) in enumerate(found, 1):
        out.append(_header(runs, f"{i}/{len(found)}"))
        out.append(part.explain(backend, "count" if isinstance(term, T.AggSpec) else T.AggBundle(term.specs)))
    return "\n".join(out)


def source(q, backend, found: list) -> str:
    out = []
    for i, (label, part, term, runs) in enumerate(found, 1):
        out.append(f"// {_header(runs, f'{i}/{len(found)}')}")
        out.append(part.source(backend, "count" if isinstance(term, T.AggSpec) else T.AggBundle(term.specs)))
    return "\n".join(out)


def compiled(q, found: list, tiered):
    """q.compile(qc.count_distinct(f)): the compiled q.distinct(f).count(); an agg with
    several parts has no one compiled plan."""
    if len(found) == 1 and isinstance(found[0][2], T.AggSpec):
        return found[0][1].compile("count", tiered=tiered)
    raise QueryError("compile() of an agg holding count_distinct: it runs as several plans "
                     "(explain() lists them); compile qc.count_distinct(f) alone, and the other "
                     "aggregates as their own qc.agg(...)")
