"""What one fused pass computes, independent of any dialect.

A query chain (sources, selects, wheres, one terminal) is lowered by `querycompute` into one
`Pass`: an `ElementProgram` (what happens to element i: load inputs, compute locals, drop the
element if a filter fails, produce output values) and a `Terminal` (what is done with the
surviving elements: store them in order, or reduce them).

Execution model every backend implements (n is the sequence length, given at launch):

    for i in range(n):                      # in parallel; order only matters for results
        <body statements in order>          # Let defines a local, Filter may drop element i
        <terminal consumes outputs / agg values of element i>

`ToArray` stores the outputs of the surviving elements densely, in source order
(order-preserving compaction when the body has a Filter). `Reduce` combines each `Agg` over
the surviving elements; all aggs of one Reduce share the single pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from .. import dtypes as D
from .expr import Cast, Const, Expr

AGG_OPS = ("sum", "min", "max", "count", "any", "all", "first", "fold")


@dataclass(frozen=True)
class InputSpec:
    """One input buffer: `name` is a valid C identifier; elements of `dtype` (strided or not,
    decided at launch). `element`: (array name, j, m) when this input is component j of an
    array of shaped elements of m scalars each (shaped.py's columns X[:, j]); the GPU kernels
    may then read the whole element from the array's own buffer (_codegen/elements.py)."""
    name: str
    dtype: str
    element: tuple = ()


@dataclass(frozen=True)
class ParamSpec:
    """A scalar kernel parameter (captured value); expressions refer to it with expr.Param.
    `origin` says, for messages only, what the parameter stands for when it is no captured
    value: "range" for qc.range's int64 start and step. `table`: the parameter is a 1-D
    array of `dtype` computed per call, read only through expr.Lookup (a string function's
    value per distinct string: frontend/strings.py); only the host backends take one
    (BackendCaps.lookup_tables)."""
    name: str
    dtype: str
    origin: str = field(default="", compare=False, repr=False)
    table: bool = False


@dataclass(frozen=True)
class Let:
    """Define local `name` (a valid C identifier, unique in the program) = expr."""
    name: str
    expr: Expr


@dataclass(frozen=True)
class Filter:
    """Keep the element only if `cond` (a bool expr) is true."""
    cond: Expr


Stmt = Union[Let, Filter]


@dataclass(frozen=True)
class ElementProgram:
    inputs: tuple[InputSpec, ...]
    params: tuple[ParamSpec, ...]
    body: tuple[Stmt, ...]
    outputs: tuple[Expr, ...]          # the element's value(s) after the chain

    @property
    def has_filter(self) -> bool:
        return any(isinstance(s, Filter) for s in self.body)

    @property
    def output_dtypes(self) -> tuple[str, ...]:
        return tuple(e.dtype for e in self.outputs)


@dataclass(frozen=True)
class ToArray:
    """Store every output of every surviving element, in source order.

    `window` (a pass with a filter only): the names of two int64 params, lo and hi, with
    0 <= lo <= hi (the caller clamps; hi may exceed the survivor count). Only the
    survivors of rank lo <= r < hi (r counts survivors from 0, in source order) are
    stored, the one of rank r at index r - lo: the results are the
    max(0, min(count, hi) - lo) survivors of the window. A skip/take after a filter thus
    costs the filter's work plus the window, never the whole compaction: backends skip
    the element work of blocks / chunks whose survivors all lie outside the window.

    `element` > 0: the outputs, all of one dtype, are the `element` components (C order) of
    one shaped element, and this pass's result is the query's final (m, *s) array; a backend
    may store them as the columns of one (m, element) array (the cpu backend does, so the
    result needs no stacking copy). Backends that ignore it store separate columns."""
    window: Optional[tuple[str, str]] = None
    element: int = 0


@dataclass(frozen=True)
class Agg:
    """One aggregate over the surviving elements.

    op      values                           accumulator / identity / combine
    sum     (x,) with x.dtype == dtype       + ; identity 0 (floats: tree/lane order, deterministic)
    min     (x,) with x.dtype == dtype       np.minimum (NaN wins); identity +inf / type max
    max     (x,) with x.dtype == dtype       np.maximum (NaN wins); identity -inf / type min
    count   ()                               int64 count of surviving elements
    any     (p,) p bool                      logical or; identity False
    all     (p,) p bool                      logical and; identity True
    first   the element's values             the values at the smallest surviving index; the
                                             result also holds that index (int64, -1 if none)
    fold    (x,) with x.dtype == dtype       LINQ's Aggregate: `combine`, an Expr over
                                             Var("acc", dtype) and Var("item", dtype), is
                                             associative but maybe not commutative; the
                                             result is combine(..combine(combine(seed, x0),
                                             x1).., xk) over the survivors in element order,
                                             and `seed` (a Const) when none survived
    `dtype` is the accumulator type (e.g. int64 for a sum of int32, float32 for float16);
    for `first` it is "int64" (the index) and for count "int64".

    A fold's seed is NOT an identity: every backend keeps partial states (empty flag,
    value), combines them in element order (P, Q) -> P if Q is empty, Q if P is empty,
    else combine(P, Q) with P the earlier elements, and applies the seed once at the end.
    That needs an associative combine; `in_order` (a combine not proved associative,
    _codegen/associative.py, and not stated so) asks for LINQ's fold itself instead: the
    seed first, then every survivor in element order, in one sequential pass (GPU
    dialects refuse it: querycompute/plan/plan.py, refuse_parallel).
    Float sums start from +0.0, as np.sum does (a sum of -0.0s is +0.0).
    """
    op: str
    values: tuple[Expr, ...]
    dtype: str
    combine: Optional[Expr] = None
    seed: Optional[Const] = None
    in_order: bool = False


# NumPy's accumulators of narrow integer sums / means: a sum of bool or integers of at most
# 32 bits is int64 (uint64 for unsigned), a mean float64. A dialect without 64-bit values
# keeps such a sum in two 32-bit words (ops/reduce/two_words.py) and refuses other 64-bit values.
WIDE = ("int64", "uint64", "float64")


def narrow_value(agg: Agg) -> Expr | None:
    """The narrow integer / bool expression a sum Agg accumulates in a 64-bit type (its value
    is Cast(x, int64 | uint64 | float64) with x bool or an integer of at most 32 bits), else
    None: a sum that needs no 64-bit accumulator, or one whose values are 64-bit."""
    if agg.op != "sum" or len(agg.values) != 1:
        return None
    return narrow_cast(agg.values[0], agg.dtype)


def narrow_cast(v: Expr, dtype: str) -> Expr | None:
    """x when `v` is Cast(x, dtype) with `dtype` one of WIDE and x bool or an integer of at
    most 32 bits (a sum / mean of x that NumPy accumulates in 64 bits), else None. The
    query layer uses it too: a webgpu group_by takes such values in their own type."""
    if dtype not in WIDE or not isinstance(v, Cast) or v.dtype != dtype:
        return None
    x = v.x
    if x.dtype == "bool" or (D.is_int(x.dtype) and D.bits(x.dtype) <= 32):
        return x
    return None


@dataclass(frozen=True)
class Reduce:
    aggs: tuple[Agg, ...]


Terminal = Union[ToArray, Reduce]


@dataclass(frozen=True)
class Pass:
    """One fused pass: the unit a backend compiles (and caches) and launches."""
    program: ElementProgram
    terminal: Terminal
    name: str = "qc_kernel"            # valid C identifier, used as the kernel name prefix

    def __post_init__(self):
        window = getattr(self.terminal, "window", None)
        if window is not None:
            params = {s.name: s.dtype for s in self.program.params}
            if not self.program.has_filter:
                raise ValueError(f"pass {self.name}: a ToArray window needs a filter (slice a map's "
                                 "input instead)")
            if len(window) != 2 or any(params.get(w) != "int64" for w in window):
                raise ValueError(f"pass {self.name}: ToArray window {window!r} must name two int64 params")

    @property
    def window_params(self) -> Optional[tuple[int, int]]:
        """Positions in program.params of the ToArray window's lo and hi, or None."""
        window = getattr(self.terminal, "window", None)
        if window is None:
            return None
        names = [s.name for s in self.program.params]
        return names.index(window[0]), names.index(window[1])

    @property
    def stage_op(self) -> str:
        """The stage op that runs this pass: "map" (elementwise, every element stored),
        "compact" (order-preserving stream compaction: a filter, then stored) or "reduce"
        (two-stage reduction). Each op's algorithm has one home in the kernel compiler."""
        if isinstance(self.terminal, Reduce):
            return "reduce"
        return "compact" if self.program.has_filter else "map"
