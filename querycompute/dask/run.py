"""Terminals on Dask inputs: one fused pass per chunk on the workers, partials combined by a
Dask tree (DESIGN.md section 5c). Dask is the engine; nothing here schedules.

    q.sum() on a DaskSource
      client: check the chain (only select/where, then group_by, are distributed), resolve
              the backend for the chunk size, and run the chunk query once on the empty
              "meta" chunk with tiered=False: that plans it, validates it (errors surface
              here, not in a worker) and compiles the kernel into the disk cache
      graph:  per chunk, a ChunkTask(block) -> the normal engine on qc.query(block)
              (engine.run: the worker's memo, else its disk cache, else it compiles) ->
              a partial; partials combine pairwise in chunk order (a binary tree of
              dask.delayed: order matters for first and aggregate) -> a finishing task
      then:   dask.compute on whatever scheduler is active (a distributed Client if one
              exists); lazy(q) returns the Dask object instead

What a chunk hands on (partials.py has the combine rules and the finishes):
    sum, count, any, all    the chunk's own terminal value
    min, max, first         the chunk's value, or None for a chunk with no survivor
    mean                    (sum, count) of the chunk
    last, single            the chunk's last match / (count, first) of its matches
    aggregate(func, seed)   the chunk's survivors folded WITHOUT the seed (partials.py)
    to_array                the chunk's arrays: concatenated lazily into a Dask array
    group_by                the chunk's groups (sorted by key), merged and re-reduced

Nothing compiled and no code object is pickled: a task carries the chain and the terminal
with every user function as its source text plus captured values (dask_ship.py), so a worker
needs neither the user's file nor module; the worker's engine finds the kernel by signature.
"""
from __future__ import annotations

import collections
import os

import numpy as np

from ..run import engine
from ..graph import terminals as T
from ..errors import QueryError
from ..graph import graph as G
from ..graph.graph import Chain, Terminal, first_breaker, positional
from ..sources.sources import Source, is_device_array
from ..run import partials as P
from .ship import ship_chain, ship_terminal

# Each partition would encode a string column with a dictionary of its own, and partial
# results combine by code: refused until the dictionary is shared across partitions.
DASK_STRINGS = ("is a string column; a Dask query reads numeric columns only (each partition "
                "would encode the strings with a dictionary of its own): encode it first, e.g. "
                "ddf.name.astype('category').cat.as_known().cat.codes")

# What each worker ran: (pid, backend, terminal, n, ((kernel, cache origin), ...)).
# worker_log() reads it (e.g. client.run(worker_log)); bounded, newest last.
_LOG: collections.deque = collections.deque(maxlen=256)

def worker_log() -> list:
    """The chunk runs this process made (run it on the workers: client.run(worker_log))."""
    return list(_LOG)


class ChunkTask:
    """One chunk's run, the same for every chunk: the chain, its backend, the terminal.
    Called with the chunk's blocks (one per column, or a dataframe partition)."""

    def __init__(self, kind, fields, q, backend: str, term: Terminal, folds=()):
        self.kind, self.fields = kind, fields
        self.ops, self.codes = ship_chain(q._ops, q._codes)   # text + captures (dask_ship.py)
        self.kinds = q._kinds
        self.backend, self.term = backend, ship_terminal(term)
        self.folds = folds             # (index, partials.FoldRule) of folds to run on values

    def query(self, items: tuple) -> Chain:
        if len(items) == 1 and hasattr(items[0], "columns") and self.kind == "table":
            src = _frame_source(items[0], self.fields)    # a dataframe partition (or its meta)
        else:
            src = Source(self.kind, tuple(items), self.fields)
        return Chain(src, self.ops, self.backend, self.kinds, self.codes)

    def __call__(self, *items):
        _serial_in_worker()
        q = self.query(items)
        out = engine.run(q, self.term, None, tiered=False) if self.term is not None else {}
        _note(engine.last_trace())
        for key, rule in self.folds:          # aggregate(func, seed): fold this chunk's values
            values = engine.run(rule.values_query(q), _TO_ARRAY, None, tiered=False)
            _note(engine.last_trace())
            out[key] = rule.partial(values)
        return out


def _frame_source(frame, fields: tuple) -> Source:
    """A pandas partition read as qc.query(partition) reads it: its unreadable columns (and
    a column holding nulls in this partition) skipped, with the reason a lambda reading one
    is told; the engine reads only the columns the lambdas read (column_use.py)."""
    from ..sources.source_adapters import table_of
    table = table_of(frame)
    table.skipped.update({f: DASK_STRINGS for f in table.strings})
    return Source("table", (frame,), tuple(f for f in fields if f not in table.skipped), table=table)


_TO_ARRAY = Terminal("to_array")
_WORKER = {"checked": False}


def _serial_in_worker() -> None:
    """In a `distributed` worker process the chunks are the parallelism (one task per worker
    thread), so the cpu backend runs every kernel as one call on the task's thread there: the
    morsel pool in every task would oversubscribe the cores (workers x pool threads). (The
    same entry points compute the same chunks either way: the results keep their bits.)"""
    if _WORKER["checked"]:
        return
    _WORKER["checked"] = True
    try:
        from distributed import get_worker
        get_worker()
    except (ImportError, ValueError):
        return                         # the client's own threads: leave the pool alone
    from ..backends.cpu import cpu
    cpu._parallel["allowed"] = False


def _note(trace) -> None:
    _LOG.append((os.getpid(), trace.backend, trace.terminal, trace.n,
                 tuple((k.name, k.cache) for k in trace.kernels)))


def lazy(q):
    """The same query whose terminals return Dask objects (a Delayed, or Dask arrays for
    to_array) instead of computing them: what a terminal's `compute=False` uses."""
    from .source import DaskSource
    src = q._source
    if not isinstance(src, DaskSource):
        raise QueryError("compute=False applies to queries over Dask inputs (qc.query(dask_array)): "
                         "this query's input is in memory and its terminal runs now; drop "
                         "compute=False")
    copy = DaskSource(src.kind, src.collections, src.fields, src.frame)
    copy.compute = False
    return type(q)(copy, q._ops, q._backend, q._kinds, q._codes)      # the user's Query


def run(q, term: Terminal, fns):
    """engine.run for a DaskSource: build the chunk graph and compute it (unless lazy)."""
    import dask
    from .operators import split
    if first_breaker(q._kinds) >= 0 and any(c.ndim > 1 for c in q._source.meta):
        from types import SimpleNamespace

        from ..sources.shaped import refuse_staged      # shaped elements: refused as without Dask
        refuse_staged(SimpleNamespace(shapes=tuple(c.shape[1:] for c in q._source.meta)), q.nodes())
    while first_breaker(q._kinds) >= 0 and q._kinds[first_breaker(q._kinds)].dask == "operator":
        q = split(q)                   # a pipeline operator: new Dask arrays, the rest after
    src = q._source
    _check_chain(q, term)
    specs = P.resolved_specs(term, fns)
    if term.name in ("first", "single") and specs[0][1].fn is not None:
        # q.first(pred) / q.single(pred) filter (inside agg(), qc.first(f) is a final select)
        key, spec = specs[0]
        q, specs = q._keyed(G.Where, spec.fn, "where"), [(key, T.AggSpec(spec.kind, None, spec.default))]
    backend = _backend(q, src)
    if term.name in ("to_array", "to_list"):
        arrays = _to_array(q, src, backend)
        if term.name == "to_array":
            return arrays
        if not src.compute:
            return dask.delayed(P.as_list, pure=True)(arrays)
        return P.as_list(dask.compute(arrays)[0])
    if term.name == "group_by":
        out = _group_by(q, src, backend, specs)
    elif term.name == "last":
        out = _last(q, src, backend, term, specs[0][1])
    else:
        out = _aggregate(q, src, backend, term, specs)
    return out


def _check_chain(q, term: Terminal) -> None:
    if term.name == "element_at":
        raise QueryError("element_at() is not distributed over Dask chunks yet; compute the "
                         "elements first (q.to_array().compute()) and query that array, or use "
                         "first() / skip the chunks with Dask")
    i = first_breaker(q._kinds)
    if i >= 0:
        what = q._kinds[i].kind
        raise QueryError(f"{what}() is not distributed over Dask chunks (docs/distributed.md "
                         f"lists the operators that are); "
                         f"compute first (qc.query(q.to_array().compute()).{what}(...)) or use "
                         f"Dask's own operation for it")


def _backend(q, src) -> str:
    """The backend every chunk runs on: `auto` decided once for the largest chunk."""
    if q._backend != "auto":
        return q._backend
    from ..backends import registry
    lens = [c for c in src.chunk_lengths() if c == c]
    on_device = any(is_device_array(getattr(c, "_meta", None)) for c in src.collections)
    return registry.choose_auto(int(max(lens)) if lens else 1 << 20, on_device)


def _meta_run(q, src, backend, term: Terminal):
    """Plan, check and compile in the client: the chunk query on the empty meta chunk."""
    return ChunkTask(src.kind, src.fields, q, backend, term)(*_meta_items(src))


def _meta_items(src) -> tuple:
    return src.meta if src.frame is None else (src.frame._meta,)   # a frame: its empty pandas meta


def _tasks(src, task) -> list:
    import dask
    call = dask.delayed(task, pure=True, traverse=False)
    return [call(*items) for items in src.blocks()]


def _to_array(q, src, backend):
    """A Dask array per output column, chunk i from chunk i (order kept); the chunk sizes are
    unknown after a where, or for a dataframe."""
    import dask
    import dask.array as da
    meta = _meta_run(q, src, backend, _TO_ARRAY)
    task = ChunkTask(src.kind, src.fields, q, backend, _TO_ARRAY)
    parts = _tasks(src, task)
    known = all(c.same_length for c in q._kinds)    # chunk lengths kept (no where)
    lens = [int(c) if known and c == c else np.nan for c in src.chunk_lengths()]
    names, cols = P.columns_of(meta)
    out = []
    for j, col in enumerate(cols):
        pick = dask.delayed(P.column, pure=True)
        blocks = [da.from_delayed(pick(p, j), shape=(m, *col.shape[1:]), dtype=col.dtype, meta=col)
                  for p, m in zip(parts, lens)]
        out.append(da.concatenate(blocks) if blocks else da.from_array(col, chunks=1))
    return P.shaped(names, out)


def _aggregate(q, src, backend, term: Terminal, specs):
    """sum/min/max/mean/count/any/all/first/aggregate and agg(...)."""
    import dask
    plan = P.ScalarPlan(q, specs, src)
    chunk_term = plan.chunk_terminal()
    _meta_run(q, src, backend, chunk_term) if chunk_term is not None else None
    task = ChunkTask(src.kind, src.fields, q, backend, chunk_term, plan.folds)
    root = P.tree(_tasks(src, task), plan.combine)
    final = dask.delayed(plan.finish, pure=True)(root, term.standalone)
    return final.compute() if src.compute else final


def _group_by(q, src, backend, specs):
    import dask
    plan = P.GroupPlan(specs)
    chunk_term = plan.chunk_terminal()
    _meta_run(q, src, backend, chunk_term)
    task = ChunkTask(src.kind, src.fields, q, backend, chunk_term)
    root = P.tree(_tasks(src, task), plan.combine)
    final = dask.delayed(plan.finish, pure=True)(root)
    return final.compute() if src.compute else final


def _last(q, src, backend, term: Terminal, spec):
    """last(pred): each chunk's last match (or None); the latest non-empty chunk's wins."""
    import dask
    chunk_term = positional("last", spec.fn, None)
    _meta_run(q, src, backend, chunk_term)
    task = ChunkTask(src.kind, src.fields, q, backend, chunk_term)
    root = P.tree(_tasks(src, task), P.later)
    default = () if spec.default is T.NO_DEFAULT else (spec.default,)
    final = dask.delayed(P.finish_last, pure=True)(root, default)
    return final.compute() if src.compute else final
