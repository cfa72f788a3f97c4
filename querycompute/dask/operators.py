"""Pipeline operators over Dask chunks (DESIGN.md sections 5b and 5c).

A chain over a DaskSource is cut at its first pipeline operator:

    prefix (select / where)  ->  operator group  ->  rest of the chain + terminal

The prefix runs per chunk as `to_array` (dask_run._to_array: a Dask array per column, chunk
i from chunk i). The operator group turns those arrays into new Dask arrays, built from Dask
tasks only (nothing is gathered in the client). The rest of the chain then runs over the new
arrays as a new DaskSource query, so a second operator is cut again the same way.

    take(n), skip(n)       chunk sizes known (no where before): Dask's slicing, so chunks
                           wholly outside the kept part never run. Unknown: per chunk its
                           length (a task); chunk i keeps the part of [n0, n0 + len) that
                           falls before / after n, n0 = the earlier chunks' lengths summed.
                           Order kept, chunks stay where they are.
    take_while, skip_while per chunk: does it hold for every element, and where it stops;
                           chunk i is cut at the first chunk that stops
    distinct([key])        per chunk its first occurrences (the engine's distinct); two
    order_by / then_by     partials combine by running the same operator on their
    order_by(...).take(k)  concatenation, left (earlier elements) first: distinct keeps the
                           global first occurrences in order, a stable sort keeps equal keys
                           in element order, top-k keeps k of 2k. A binary tree of these
                           combines (partials.tree), so the result is one chunk: for a
                           full sort the data must fit one worker (a gather-free sort by
                           Dask's shuffle would need a key Dask can compute, and the key is a
                           lambda of the element; DESIGN.md lets per-chunk sort + merge stand)
    scan(func, seed)       Dask's cumulative-reduction shape: per chunk its values folded
                           without the seed (partials.FoldRule, in parallel), the carries
                           combined in chunk order (O(chunks) scalar steps, the seed once at
                           the start), then each chunk scanned from its carry in parallel
                           (numpy backend: the seed is compiled into a scan's kernel, and
                           every chunk starts from its own carry)
    reverse, join,         not distributed: QueryError (dask_run._check_chain)
    intersect_by, except_by
"""
from __future__ import annotations

import numpy as np

from .ship import ship_chain
from .._codegen import combine as C
from ..errors import QueryError
from ..graph.graph import Chain, Scan, ScanArg, TakeWhile, first_breaker
from ..sources.sources import Source
from ..run import partials as P



def split(q):
    """The query over the operator group's output Dask arrays, with the rest of the chain."""
    from .run import _backend, _to_array
    from .source import DaskSource
    src, kinds = q._source, q._kinds
    i = first_breaker(kinds)
    j = i + 1
    if kinds[i].stage == "sort":
        while j < len(kinds) and kinds[j].then:
            j += 1
        if j < len(kinds) and kinds[j].kind == "take":
            j += 1                                    # order_by(...).take(k): top-k
    prefix = Chain(src, q._ops[:i], q._backend, kinds[:i], q._codes[:i])
    backend = _backend(q, src)
    shaped = _to_array(prefix, src, backend)
    names, cols = P.columns_of(shaped)
    if names == "tuple":
        raise QueryError(f"{kinds[i].kind}() over tuple elements is not distributed over Dask "
                         f"chunks; select a record (lambda v: {{'a': ..., 'b': ...}}) first")
    group = Chain(Source("array", (), ()), q._ops[i:j], q._backend, kinds[i:j], q._codes[i:j])
    out = _apply(group, kinds[i], cols, names, backend, prefix, src)
    fields = () if names is None else names
    new = DaskSource("array" if names is None else "table", tuple(out), fields)
    new.compute = src.compute
    return Chain(new, q._ops[j:], q._backend, kinds[j:], q._codes[j:])


def _apply(group, node, cols, names, backend, prefix, src) -> list:
    import dask
    blocks = [dict(zip(names, b)) if names else b[0]
              for b in zip(*[c.to_delayed().ravel() for c in cols])]
    if node.stage == "window":
        n = group._ops[0].value
        known = cols[0].chunks[0]
        if all(m == m for m in known):                # sizes known: whole chunks dropped
            return _sliced(cols, n, node.kind == "take")
        lens = [dask.delayed(_length, pure=True)(b) for b in blocks]
        parts = [dask.delayed(_cut, pure=True)(b, lens[:k], n, node.kind == "take")
                 for k, b in enumerate(blocks)]
    elif node.stage == "take_while":
        local = _checked(group, names, backend, cols)
        stops = [dask.delayed(local.stop, pure=True)(b) for b in blocks]
        parts = [dask.delayed(local.cut_while, pure=True)(b, stops[:k], node.kind == "take_while")
                 for k, b in enumerate(blocks)]
    elif node.stage == "scan":
        parts, cols = _scan(group, blocks, names, prefix, src, backend, cols)
    else:                                             # distinct, order_by (+ top-k)
        local = _checked(group, names, backend, cols)
        leaves = [dask.delayed(local, pure=True)(b) for b in blocks]
        parts = [P.tree(leaves, local.merge)]
    return _columns(parts, cols)


def _checked(group, names, backend: str, cols: list) -> "LocalRun":
    """The group's LocalRun, run once in the client on empty columns: it plans and checks the
    lambdas here (an error surfaces in the client, not in a worker) and compiles the kernel
    into the disk cache the workers then load it from."""
    local = LocalRun(group, "array" if names is None else "table", names or (), backend)
    empty = [np.empty(0, dtype=c.dtype) for c in cols]
    local(dict(zip(names, empty)) if names else empty[0])
    return local


def _columns(parts: list, cols: list) -> list:
    """Dask arrays (unknown chunk sizes), one per column, from per-chunk element blocks."""
    import dask
    import dask.array as da
    out = []
    for j, col in enumerate(cols):
        pick = dask.delayed(P.column, pure=True)
        meta = np.empty(0, dtype=col.dtype)
        out.append(da.concatenate([da.from_delayed(pick(p, j), shape=(np.nan,), dtype=col.dtype,
                                                   meta=meta) for p in parts]))
    return out


def _sliced(cols: list, n: int, take: bool) -> list:
    """take / skip when every chunk's size is known (no where before it): Dask's own slicing,
    so chunks wholly past the first n (take) or before it (skip) are never computed."""
    total = int(sum(cols[0].chunks[0]))
    k = min(max(n, 0), total)
    return [c[:k] if take else c[k:] for c in cols]


def _length(block) -> int:
    return len(next(iter(block.values()))) if isinstance(block, dict) else len(block)


def _slice(block, lo: int, hi: int):
    if isinstance(block, dict):
        return {k: v[lo:hi] for k, v in block.items()}
    return block[lo:hi]


def _cut(block, before: list, n: int, take: bool):
    """take(n) / skip(n) on one chunk that starts at element sum(before)."""
    start, m = sum(before), _length(block)
    k = min(max(n - start, 0), m)
    return _slice(block, 0, k) if take else _slice(block, k, m)


class LocalRun:
    """The operator group run by the engine on one block (a worker's chunk, or two partials
    concatenated): functions travel as text + captures (dask_ship.py)."""

    def __init__(self, group, kind: str, fields: tuple, backend: str):
        self.kind, self.fields, self.backend = kind, fields, backend
        self.ops, self.codes = ship_chain(group._ops, group._codes)
        self.kinds = group._kinds

    def query(self, block, ops=None, kinds=None, codes=None) -> Chain:
        items = tuple(block[f] for f in self.fields) if isinstance(block, dict) else (block,)
        return Chain(Source(self.kind, items, self.fields), self.ops if ops is None else ops,
                     self.backend, self.kinds if kinds is None else kinds,
                     self.codes if codes is None else codes)

    def run(self, q):
        from ..run import engine
        from .run import _TO_ARRAY, _note, _serial_in_worker
        _serial_in_worker()
        out = engine.run(q, _TO_ARRAY, None, tiered=False)
        _note(engine.last_trace())
        return out

    def __call__(self, block):
        return self.run(self.query(block))

    def merge(self, a, b):
        return self(C.concatenate([a, b]))

    def stop(self, block):
        """take_while / skip_while: where the predicate first fails in this chunk (None: never)."""
        q = self.query(block)
        m = _length(self.run(Chain(q._source, q._ops, q._backend, (TakeWhile,), q._codes)))
        return None if m == _length(block) else m

    def cut_while(self, block, stops_before: list, take: bool):
        stopped = next((s for s in stops_before if s is not None), None) is not None
        if stopped:
            return _slice(block, 0, 0) if take else block
        k = self.stop(block)
        k = _length(block) if k is None else k
        return _slice(block, 0, k) if take else _slice(block, k, _length(block))


def _scan(group, blocks, names, prefix, src, backend, cols) -> tuple:
    import dask
    if names is not None:
        raise QueryError("scan() over record elements is not distributed over Dask chunks; "
                         "select one value first")
    arg = group._ops[0]
    if not isinstance(arg, ScanArg):
        raise QueryError("scan() without a function")
    from ..graph import terminals as T
    meta_q = Chain(P._meta_source(src), prefix._ops, prefix._backend, prefix._kinds, prefix._codes)
    rule = P.FoldRule(meta_q, T.AggSpec("fold", arg.fn, seed=arg.seed, associative=arg.associative), src)
    partials = [dask.delayed(rule.partial, pure=True)(b) for b in blocks]
    # planned, checked and typed in the client on the empty meta chunk (its backend compiles)
    meta = LocalRun(group, "array", (), backend)(np.empty(0, dtype=cols[0].dtype))
    local = LocalRun(group, "array", (), "numpy")   # the seed is compiled into a scan kernel
    parts, carry = [], None
    for b, part in zip(blocks, partials):
        parts.append(dask.delayed(_scan_chunk, pure=True)(local, rule, b, carry, meta.dtype))
        carry = part if carry is None else dask.delayed(rule.combine, pure=True)(carry, part)
    return parts, [meta]


def _scan_chunk(local, rule, block, carry, dtype):
    """One chunk scanned from the fold of everything before it (the seed applied once)."""
    seed = local.ops[0].seed
    if carry is not None:
        value = np.asarray(rule.finish(carry, _SEEDED(seed), "scan"))
        # a Python seed stays a Python scalar (NumPy's weak promotion, as in chunk 0)
        seed = value.item() if isinstance(seed, (bool, int, float)) else value.astype(type(seed))[()]
    op = ScanArg(local.ops[0].fn, seed, local.ops[0].associative)
    code = (local.codes[0][0], type(seed), repr(seed), op.associative)
    return local.run(local.query(block, (op,), (Scan,), (code,))).astype(dtype, copy=False)


def _SEEDED(seed):
    from ..graph import terminals as T
    return T.AggSpec("fold", None, seed=seed)


