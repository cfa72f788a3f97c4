"""Inputs larger than device memory: a GPU query over host arrays, run chunk by chunk.

With QUERYCOMPUTE_DEVICE_MEMORY=<bytes> (config.py), a query on a backend that streams
(BackendCaps.streams: cuda, opencl) whose host columns need more bytes than that budget
does not copy them whole: the engine hands it here, and
  1. the chunk length is the budget over twice the bytes of one element of every column
     (two chunks' buffers fit: the one being computed and the next one being copied in),
     rounded down to a multiple of CHUNK_ALIGN elements (whole tiles of every kernel, and
     16-byte aligned views for the wide loads);
  2. each chunk [lo, hi) runs as the same chain on the columns' views [lo, hi) through the
     normal engine (its memo: one compile for every chunk of a length, two lengths at most:
     the full chunks and the last);
  3. the chunks' partial results combine, left to right, with the rules every multi-block
     reduction uses (_codegen/combine.py through partials.ScalarPlan: sums and counts added
     in chunk order, min/max, first = the earliest chunk's, any/all, mean as (sum, count),
     aggregate folds without the seed, the seed once at the end); to_array concatenates the
     chunks' arrays in order (combine.concatenate).
What can stream: the chains Dask distributes (select/where, then an aggregate or to_array);
a chain with a pipeline breaker (sort, scan, distinct, join, take/skip), group_by,
element_at, last and to_list run whole (and a device that cannot hold them fails, which the
engine's circuit breaker handles for `auto`).
Overlap: each chunk runs inside `gpu_staging.prefetching` with (this chunk's view, the next
chunk's view) of every column, so the launch loops double-buffer their inputs: chunk k+1's
copy (CUDA: pinned staging buffers, a second stream; OpenCL: a second queue) is issued right
after chunk k's kernels and runs while they do (backends/gpu_staging.py).
The trace (qc.last_trace()) of a streamed call says how many chunks ran (`Trace.chunks`)
and lists every chunk's kernels.
"""
from __future__ import annotations

import numpy as np

from .. import config
from . import partials as P
from .._codegen.combine import concatenate
from ..backends import registry
from ..backends.base import Trace
from ..backends.gpu.gpu_staging import prefetching
from ..graph.graph import Chain, Terminal

CHUNK_ALIGN = 1 << 16           # elements: a multiple of every tile (BLOCK x 16 x runs)
_STREAMED_TERMINALS = ("to_array", "sum", "min", "max", "mean", "count", "any", "all", "first",
                       "single", "agg", "aggregate")


def budget() -> int | None:
    """QUERYCOMPUTE_DEVICE_MEMORY in bytes, or None (no budget: inputs go whole)."""
    return config.get("QUERYCOMPUTE_DEVICE_MEMORY")


def chunk_length(cols, limit: int) -> int:
    """Elements a chunk holds so that two chunks of every column fit in `limit` bytes."""
    per_element = sum(c.dtype.itemsize * (c.size // max(1, len(c))) for c in cols) or 1
    fit = limit // (2 * per_element)
    return max(CHUNK_ALIGN, fit // CHUNK_ALIGN * CHUNK_ALIGN)


def wanted(q, term: Terminal, name: str, cols, n: int) -> bool:
    """Whether this call streams: a backend that streams (BackendCaps.streams), a budget the
    host columns exceed, a chain and terminal that combine over chunks."""
    if not cols or not registry.get(name).caps.streams:
        return False
    limit = budget()
    if limit is None or term.name not in _STREAMED_TERMINALS:
        return False
    if any(type(c) is not np.ndarray for c in cols):
        return False                   # device arrays are already there
    table = q._source._table
    if table is not None and table.strings:
        return False                   # string codes: one dictionary per call, not per chunk
    if sum(c.nbytes for c in cols) <= limit or n <= chunk_length(cols, limit):
        return False
    return not any(cls.breaks_stage for cls in q._kinds)


def run(q, term: Terminal, fns, name: str, cols, n: int, t0: float, clock):
    """The terminal's value, computed chunk by chunk (see the module docstring)."""
    from . import engine
    from ..sources.sources import Source
    src = q._source
    step = chunk_length(cols, budget())
    specs = P.resolved_specs(term, fns)
    trace = Trace(name, term.name, n)
    chunks = [(lo, min(n, lo + step)) for lo in range(0, n, step)]

    def chunk_query(lo, hi):
        items = tuple(c[lo:hi] for c in cols)
        return Chain(Source(src.kind, items, src.fields), q._ops, name, q._kinds, q._codes)

    def ahead(j):
        """Chunk j's views paired with chunk j+1's, for the loops' double buffers."""
        lo, hi = chunks[j]
        nlo, nhi = chunks[j + 1] if j + 1 < len(chunks) else (hi, hi)
        return prefetching([(c[lo:hi], c[nlo:nhi] if nhi > nlo else None) for c in cols])

    def note():
        last = engine.last_trace()
        trace.kernels.extend(last.kernels)

    if term.name == "to_array":
        parts = []
        for j, (lo, hi) in enumerate(chunks):
            with ahead(j):
                parts.append(engine.run(chunk_query(lo, hi), term, fns, tiered=False))
            note()
        out = concatenate(parts)
    else:
        plan = P.ScalarPlan(q, specs, _Meta(src, cols))
        chunk_term = plan.chunk_terminal()
        total = None
        for j, (lo, hi) in enumerate(chunks):
            cq = chunk_query(lo, hi)
            with ahead(j):
                part = engine.run(cq, chunk_term, None, tiered=False) if chunk_term is not None else {}
                note()
                for key, rule in plan.folds:
                    part[key] = rule.partial(engine.run(rule.values_query(cq), Terminal("to_array"), None, tiered=False))
            total = part if total is None else plan.combine(total, part)
        out = plan.finish(total, term.standalone)
    trace.chunks = len(chunks)
    trace.total_ms = (clock() - t0) * 1e3
    engine._last.value = trace
    return out


class _Meta:
    """What partials.ScalarPlan reads of a source: kind, fields, the empty "meta" chunk."""

    def __init__(self, src, cols):
        self.kind, self.fields, self.range_args = src.kind, src.fields, src.range_args
        self.meta = tuple(c[:0] for c in cols)
