"""Terminal operators as data: what to compute (AggSpec) and how raw kernel results become
the user's values (NumPy result dtypes, empty-sequence rules, mean = sum / count).

`qc.sum`, `qc.min`, `qc.max`, `qc.mean`, `qc.count` are AggSpec objects: usable bare
(`q.agg(total=qc.sum)`) or called with a final select (`qc.sum(lambda v: v * v)`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ElementIndexError, EmptySequenceError
from ..frontend.datetimes import NAT, as_time, viewed
from ..sources.shaped import stack


class _NoDefault:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<no default>"


NO_DEFAULT = _NoDefault()


class _PerCall:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<function given per call>"


# The `fn` of a spec in a shared terminal (graph.WITH_FN): "a function, passed with each
# call", so one request object serves q.count(lambda v: ...) however often it is called.
PER_CALL = _PerCall()

# Aggregate kinds that need at least one element unless a default is given.
NEEDS_ELEMENT = ("min", "max", "mean", "first")


class AggSpec:
    """One aggregate: kind, optional lambda (final select, or predicate for count/any/all/first),
    default for empty sequences, seed for `aggregate`, `associative` (the user states that an
    aggregate's func is associative: it folds as a parallel tree even where the compiler can't
    prove it, _codegen/associative.py). Treated as immutable; a plain slotted class because one
    is made per terminal call that takes a function."""
    __slots__ = ("kind", "fn", "default", "seed", "associative")

    def __init__(self, kind: str, fn: Any = None, default: Any = NO_DEFAULT, seed: Any = None,
                 associative: bool = False):
        self.kind = kind
        self.fn = fn
        self.default = default
        self.seed = seed
        self.associative = associative

    def __call__(self, f=None, *, default=NO_DEFAULT) -> "AggSpec":
        if self.fn is not None:
            raise TypeError(f"qc.{self.kind}(...) already has a function; call qc.{self.kind}(f) once")
        if f is not None and not callable(f) and not hasattr(f, "body") and not isinstance(f, str):
            raise TypeError(f"qc.{self.kind} takes a function (a lambda), got {type(f).__name__}")
        if default is not NO_DEFAULT and self.kind not in NEEDS_ELEMENT:
            raise TypeError(f"qc.{self.kind} never needs default=: it is defined on empty sequences")
        return AggSpec(self.kind, f, default, self.seed, self.associative)

    def __repr__(self) -> str:
        return f"qc.{self.kind}" + ("(<fn>)" if self.fn is not None else "")


# Specs without function or default are shared, so the common terminals allocate nothing.
PLAIN = {k: AggSpec(k) for k in ("sum", "min", "max", "mean", "count", "any", "all", "first")}

sum = AggSpec("sum")      # noqa: A001  (public API names mirror the terminal operators)
min = AggSpec("min")      # noqa: A001
max = AggSpec("max")      # noqa: A001
mean = AggSpec("mean")
count = AggSpec("count")
first = AggSpec("first")
any = AggSpec("any")      # noqa: A001
all = AggSpec("all")      # noqa: A001
count_distinct = AggSpec("count_distinct")
"""qc.count_distinct(f=None): SQL COUNT(DISTINCT f), polars n_unique, for agg(...) and
group_by(...).agg(...): how many distinct f(element) (the element itself without f; a
tuple-valued f counts distinct tuples), as an int64. Equality is distinct()'s (all NaNs one
value, -0.0 == 0.0: pandas nunique(dropna=False)). Not a reduction of the pass: it runs as
distinct(f).count() (per group: distinct on (key, f), then a count per key;
api/count_distinct.py), so every backend's distinct machinery counts it.

Example:
    ```python
    q.group_by(lambda r: r.part).agg(sizes=qc.count_distinct(lambda r: r.size), n=qc.count)
    ```
"""
AGG_SPEC_KINDS = ("sum", "min", "max", "mean", "count", "first", "any", "all", "fold",
                  "count_distinct")


def aggregate(func, seed, *, associative: bool = False) -> AggSpec:
    """qc.aggregate(func, seed, associative=False): LINQ's fold as an aggregate spec, for
    agg(...) and group_by(...).agg(...) (the rules of Query.aggregate)."""
    if not callable(func) and not hasattr(func, "body") and not isinstance(func, str):
        raise TypeError(f"qc.aggregate takes a function func(acc, v), got {type(func).__name__}")
    return AggSpec("fold", func, seed=seed, associative=check_associative(associative))


def check_associative(associative) -> bool:
    """The `associative=` keyword of aggregate / scan: a bool, else TypeError."""
    if not isinstance(associative, bool):
        raise TypeError(f"associative= takes True or False, got {associative!r}")
    return associative


@dataclass(frozen=True)
class Finish:
    """How one spec's raw results become its value: indexes into the raw result list."""
    kind: str
    agg: int                 # index of the spec's own Agg in the Reduce
    count: int = -1          # index of the shared count Agg (min/max/mean), else -1
    result_dtype: str = ""
    shape: str = "scalar"    # first: "scalar" | "tuple" | "record"
    fields: tuple = ()       # first on records: field names
    bool_flip: bool = False  # min/max over bool are computed as all/any
    times: tuple = ()        # first: per value, its datetime64/timedelta64 type or None
    nat: int = -1            # min/max/sum of dates: index of the any(NaT) Agg (NaT wins)


_SCALAR = {name: np.dtype(name).type for name in
           ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64")}


def finish(f: Finish, raw: list, spec: AggSpec, key: str | None) -> Any:
    """Turn raw backend results into the user's value for one spec (`key`: its agg() name)."""
    kind = f.kind
    if kind == "shaped":                    # one Finish per component (ShapedFinish)
        return f.finish(raw, spec, key)
    r = raw[f.agg]
    if f.nat >= 0:                          # a date / duration: NumPy's NaT propagates
        if kind != "sum" and int(raw[f.count]) == 0:
            return _empty(spec, key)
        return as_time(NAT if bool(raw[f.nat]) else r, f.result_dtype)
    if kind == "sum" or kind == "fold":
        t = _SCALAR[f.result_dtype]
        if type(r) is t:
            return r
        if f.result_dtype == "float16":   # float32 accumulator -> float16: inf if it overflows
            return _to_half(r)            # (np.sum gives inf too)
        return t(r)
    if kind == "count":
        return int(r)
    if kind == "any" or kind == "all":
        return bool(r)
    if kind == "first":
        index, values = r
        if index < 0:
            return _empty(spec, key)
        if f.times:
            values = viewed(list(values), f.times)
        if f.shape == "scalar":
            return values[0]
        if f.shape == "shaped":             # fields: the element shape
            return np.array(values).reshape(f.fields)
        if f.shape == "parts":              # a tuple / record with shaped items
            return join_parts(values, f.fields, columns=False)
        if f.shape == "record":
            return dict(zip(f.fields, values))
        return tuple(values)
    n = int(raw[f.count])
    if n == 0:                              # min / max / mean of nothing
        return _empty(spec, key)
    if kind == "mean":
        acc = _SCALAR["float32" if f.result_dtype == "float16" else f.result_dtype]
        if f.result_dtype == "float16":
            return _to_half(acc(r) / n)
        return _SCALAR[f.result_dtype](acc(r) / n)
    return _SCALAR[f.result_dtype](r)


def finisher(f: Finish, spec: AggSpec):
    """finish() for one standalone spec, as a function of the raw results, for the warm path:
    where the backend's raw value already is the user's (a sum in its result dtype, a count,
    a bool) it costs one type check; anything else goes through finish()."""
    want = {"sum": _SCALAR.get(f.result_dtype), "fold": _SCALAR.get(f.result_dtype),
            "count": int, "any": bool, "all": bool}.get(f.kind)
    idx = f.agg

    def finish_one(raw):
        r = raw[idx]
        return r if type(r) is want else finish(f, raw, spec, None)
    return finish_one


class ShapedFinish:
    """How a terminal over shaped elements finishes: one terminals.Finish per component,
    stacked into an array of the element shape (sum() of vec3 elements is a vec3)."""
    kind = "shaped"
    agg = 0
    result_dtype = ""

    def __init__(self, parts: tuple, shape: tuple):
        self.parts, self.shape = parts, shape

    def finish(self, raw, spec, key):
        values = [finish(p, raw, spec, key) for p in self.parts]
        if getattr(spec, "default", 0) is None and values.count(None) == len(values):
            return None                # min/max/mean/first of nothing with default=None: None
        return np.array(values).reshape(self.shape)


def join_parts(values, fields: tuple, columns: bool = True, to_list: bool = False):
    """The inverse of _parts: one value per leaf (output columns, or first()'s scalars) -> the
    tuple / dict of items, a shaped item as an (m, *s) array (shaped.stack) or an s array."""
    kind, spec = fields
    out, i = [], 0
    for _, shape in spec:
        k = math.prod(shape) if shape else 1
        part = values[i:i + k]
        i += k
        if not shape:
            out.append(part[0])
        else:
            out.append(stack(part, shape) if columns else np.array(part).reshape(shape))
    if to_list:                        # rows of Python values (a shaped item as nested lists)
        rows = zip(*[a.tolist() for a in out])
        return [dict(zip([n for n, _ in spec], r)) for r in rows] if kind == "record" else list(rows)
    return dict(zip([n for n, _ in spec], out)) if kind == "record" else tuple(out)


def _to_half(x) -> np.float16:
    with np.errstate(over="ignore"):
        return np.float16(x)


def _empty(spec: AggSpec, key: str | None):
    if spec.default is NO_DEFAULT:
        what = spec.kind if key is None else f"{key} ({spec.kind})"
        if spec.kind == "element_at":
            raise ElementIndexError(f"{what}: no element at that position (the index is negative or "
                                    f"past the last surviving element); pass default=... to get a "
                                    f"value instead")
        raise EmptySequenceError(f"{what} of an empty sequence (no element survived); "
                                 f"pass default=... to get a value instead")
    return spec.default


@dataclass(frozen=True)
class AggBundle:
    """qc.agg(name=spec, ...): several aggregates, for .source()/.explain() terminals."""
    specs: tuple


def agg(**named) -> AggBundle:
    return AggBundle(agg_specs(named))


def agg_specs(named: dict) -> tuple:
    if not named:
        raise TypeError("agg() needs at least one named aggregate, e.g. q.agg(total=qc.sum)")
    out = []
    for key, spec in named.items():
        if not isinstance(spec, AggSpec) or spec.kind not in AGG_SPEC_KINDS:
            raise TypeError(f"agg({key}=...) must be qc.sum, qc.min, qc.max, qc.mean, qc.count, "
                            f"qc.first, qc.any, qc.all (optionally called with a function), "
                            f"qc.count_distinct(f) or qc.aggregate(func, seed), got {spec!r}")
        out.append((key, spec))
    return tuple(out)

