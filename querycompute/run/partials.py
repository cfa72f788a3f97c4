"""Partial results of chunks (Dask partitions, streamed device chunks): what each terminal
asks of a chunk, how two chunks' partials combine (left = earlier elements), and how the
last one becomes the user's value.

The combine rules themselves live in _codegen/combine.py, below every layer, because the
backends combine windows too (webgpu's binding windows, the numpy reference's windows) and a
backend must not import run/; this module applies them to the terminals' partials:
    sum, count          added (float: in the tree's fixed order, so deterministic)
    min, max            np.minimum / np.maximum (NaN wins); None (empty chunk) is skipped
    any, all            or / and
    first               the left one unless it is None (first non-empty chunk in order)
    last                the right one unless it is None
    single              (count, first) of the matches: a count above one raises
    mean                (sum, count) pairs added; sum / count at the end (terminals.finish)
    aggregate           (FoldRule) the chunk's survivors are folded by the numpy backend's
                        own fold state (ops/reduce/reference._Fold: balanced pairs in element order)
                        with no seed; two partials combine as combine(P, Q), an empty one is
                        skipped; the seed goes in once at the end (combine(seed, total))
    group_by            combine.merge_groups: the two tables concatenated (left first),
                        stably sorted by key (NaN last; -0.0 == 0.0), each run of equal keys
                        reduced with the rules above (first: the run's first row, the left's)
The order is this module's: streaming joins chunks left to right, Dask in `tree`'s pairs.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .._codegen import combine as C
from .._codegen.ir import expr as E
from .._codegen.numpy_eval import Eval
from .._codegen.ops.reduce.reference import _Fold
from ..graph import terminals as T
from ..errors import FoldOrderError, MultipleElementsError, QueryError
from ..plan.plan import fold_message, lower_query, param_values
from ..graph.graph import Chain, Terminal

_SUM, _N = "__qc_sum", "__qc_n"        # a mean's two partial columns: key + suffix


def resolved_specs(term: Terminal, fns) -> list:
    """The terminal's (key, AggSpec) pairs with each call's functions filled in."""
    it = iter(fns or ())
    out = []
    for key, spec in term.specs:
        if spec.fn is T.PER_CALL:
            spec = T.AggSpec(spec.kind, next(it), spec.default, spec.seed)
        out.append((key, spec))
    return out


def chunk_specs(specs, where: str) -> list:
    out = []
    for key, spec in specs:
        kind = spec.kind
        if kind in ("sum", "count", "any", "all"):
            out.append((key, T.AggSpec(kind, spec.fn)))
        elif kind in ("min", "max", "first"):
            out.append((key, T.AggSpec(kind, spec.fn, default=None)))   # None: empty chunk
        elif kind == "mean":
            out += [(key + _SUM, T.AggSpec("sum", spec.fn)), (key + _N, T.AggSpec("count"))]
        elif kind == "single":               # how many match, and the first that does
            out += [(key + _N, T.AggSpec("count", spec.fn)), (key, T.AggSpec("first", spec.fn, default=None))]
        elif kind == "fold" and where == "group_by":
            raise QueryError("group_by(...).agg(x=qc.aggregate(...)) is not distributed over Dask "
                             "chunks: a group's fold has no seedless partial there; use sum/min/"
                             "max/first/any/all/mean/count, or compute the input first")
    return out


def _mean(s, n, key, spec, rd: str):
    f = T.Finish("mean", 0, 1, rd)
    return T.finish(f, [s, n], spec, key)


def _mean_dtype(sum_dtype) -> str:
    d = np.dtype(sum_dtype)
    return str(d) if d.kind == "f" else "float64"


class FoldRule:
    """aggregate(func, seed) on chunks: its plan (the fold's Agg: combine expression and seed,
    its kernel parameters' names and values) made once in the client from the meta chunk."""

    def __init__(self, meta_q, spec, src):
        lowered, _, infos = lower_query(meta_q, Terminal(spec.kind, ((spec.kind, spec),)))
        self.index = next(i for i, f in enumerate(lowered.finishes) if f.kind == "fold")
        self.finish_rule = lowered.finishes[self.index]
        self.agg = lowered.pass_.terminal.aggs[self.finish_rule.agg]
        if self.agg.in_order:          # chunk partials of it cannot be combined
            raise FoldOrderError(fold_message(self.agg.combine, "Dask chunks"))
        self.names = tuple(ps.name for ps in lowered.pass_.program.params)
        self.params = tuple(param_values(lowered, infos, src))

    def values_query(self, q):
        return q                        # the chain's elements are the folded values

    def _ev(self, inputs, n):
        return Eval(inputs, self.params, self.names, n)

    def _state(self, agg=None):
        return _Fold(agg or self.agg)

    def partial(self, x):
        """The chunk's survivors folded without the seed: None when there are none."""
        if not isinstance(x, np.ndarray):
            raise QueryError("aggregate() over tuple or record elements is not distributed over "
                             "Dask chunks; select one value first")
        load = E.Load(0, str(x.dtype))
        value = load if str(x.dtype) == self.agg.dtype else E.Cast(load, self.agg.dtype)
        st = self._state(replace(self.agg, values=(value,)))
        with np.errstate(all="ignore"):
            st.add(self._ev([x], len(x)), None, 0, len(x))
        return st.value

    def combine(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        with np.errstate(all="ignore"):
            return self._state().combine(self._ev([], 1), a, b)

    def finish(self, total, spec, key):
        st = self._state()
        st.value, st.ev = total, self._ev([], 1)
        with np.errstate(all="ignore"):
            return T.finish(self.finish_rule, {self.finish_rule.agg: st.result()}, spec, key)


class ScalarPlan:
    """sum/min/max/mean/count/any/all/first/aggregate and agg(...) over chunks."""

    def __init__(self, q, specs, src):
        self.specs = _without_functions(specs)    # the plan travels to the workers: no code
        chunk = chunk_specs(specs, "agg")
        self._chunk_term = Terminal("agg", tuple(chunk), standalone=False) if chunk else None
        meta_q = Chain(_meta_source(src), q._ops, q._backend, q._kinds, q._codes)
        self.folds = tuple((key, FoldRule(meta_q, spec, src)) for key, spec in specs if spec.kind == "fold")
        self.kinds = {key: spec.kind for key, spec in chunk}
        # T.NO_DEFAULT is a singleton compared by identity: a pickled copy is not it
        self.defaults = {key: (spec.default,) for key, spec in specs if spec.default is not T.NO_DEFAULT}

    def chunk_terminal(self):
        term, self._chunk_term = self._chunk_term, None    # handed to the ChunkTask, not kept
        return term

    def combine(self, a: dict, b: dict) -> dict:
        out = {key: C.combine(kind, a[key], b[key]) for key, kind in self.kinds.items()}
        for key, rule in self.folds:
            out[key] = rule.combine(a[key], b[key])
        return out

    def finish(self, total: dict, standalone: bool):
        folds = dict(self.folds)
        out = {}
        for key, spec in self.specs:
            kind = spec.kind
            spec = T.AggSpec(kind, None, *self.defaults.get(key, ()))
            if kind == "fold":
                out[key] = folds[key].finish(total[key], spec, key)
            elif kind == "mean":
                s, n = total[key + _SUM], total[key + _N]
                out[key] = _mean(s, n, key, spec, _mean_dtype(np.asarray(s).dtype))
            elif kind == "single" and total[key + _N] > 1:
                raise MultipleElementsError("single() found more than one element; use first() or "
                                            "take(1), or a predicate that only one element meets")
            elif kind in ("min", "max", "first", "single") and C.is_empty(total[key]):
                out[key] = T._empty(spec, None if standalone else key)
            elif kind in ("any", "all"):
                out[key] = bool(total[key]) if np.ndim(total[key]) == 0 else np.asarray(total[key], bool)
            elif kind == "count":
                out[key] = int(total[key])
            else:
                out[key] = total[key]
        return out[self.specs[0][0]] if standalone else out


def _without_functions(specs) -> list:
    """The specs as a finish reads them (kind, default, seed): the functions already ran."""
    return [(key, T.AggSpec(s.kind, None, s.default, s.seed)) for key, s in specs]


def _meta_source(src):
    from ..sources.sources import Source
    return Source(src.kind, src.meta, src.fields)


class GroupPlan:
    """group_by(...).agg(...) over chunks: partial groups merged, then the means divided."""

    def __init__(self, specs):
        self.specs = _without_functions(specs)
        chunk = chunk_specs(specs, "group_by")
        self._chunk_term = Terminal("group_by", tuple(chunk), standalone=False)
        self.kinds = {key: spec.kind for key, spec in chunk}

    def chunk_terminal(self):
        term, self._chunk_term = self._chunk_term, None
        return term

    def combine(self, a: dict, b: dict) -> dict:
        return C.merge_groups(self.kinds, a, b)

    def finish(self, total: dict) -> dict:
        nk = len(total) - len(self.kinds)
        out = {nm: total[nm] for nm in list(total)[:nk]}
        for key, spec in self.specs:
            if spec.kind == "mean":
                s, n = total[key + _SUM], total[key + _N]
                rd = _mean_dtype(s.dtype)
                acc = np.float32 if rd == "float16" else np.dtype(rd).type
                with np.errstate(all="ignore"):
                    out[key] = (s.astype(acc) / n).astype(rd)
            else:
                out[key] = total[key]
        return out


def later(a, b):
    """last(): the later chunk's last element unless that chunk had none."""
    return C.combine("last", a, b)


def finish_last(value, spec_default: tuple):
    if value is None:
        return T._empty(T.AggSpec("last", None, *spec_default), None)
    return value


def tree(parts: list, combine):
    """Partials combined pairwise in order (left = earlier chunks), as Dask tasks."""
    import dask
    if not parts:
        raise QueryError("the Dask input has no chunks")
    step = dask.delayed(combine, pure=True)
    while len(parts) > 1:
        nxt = [step(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]


def columns_of(meta):
    """(shape names, columns) of a to_array result: an array, a tuple or a dict of arrays."""
    if isinstance(meta, dict):
        return tuple(meta), list(meta.values())
    if isinstance(meta, tuple):
        return "tuple", list(meta)
    return None, [meta]


def column(result, j: int):
    if isinstance(result, dict):
        return list(result.values())[j]
    if isinstance(result, tuple):
        return result[j]
    return result


def shaped(names, cols: list):
    if names is None:
        return cols[0]
    if names == "tuple":
        return tuple(cols)
    return dict(zip(names, cols))


def as_list(result) -> list:
    """to_list's value from computed to_array columns (as engine.assemble gives it)."""
    if isinstance(result, dict):
        names = list(result)
        return [dict(zip(names, row)) for row in zip(*(c.tolist() for c in result.values()))]
    if isinstance(result, tuple):
        return list(zip(*(c.tolist() for c in result)))
    return result.tolist()
