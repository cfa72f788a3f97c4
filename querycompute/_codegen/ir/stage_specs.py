"""What the column operations between fused passes compute, independent of any dialect.

A plan with pipeline breakers (DESIGN.md section 5b: order_by, distinct, scan, ...) runs as
fused passes (program.Pass) with column operations between them. Each operation is
described here once; every backend's stage runtime (querycompute/backends/stage_runtime.py
and its implementations) and every kernel lowering (ops/sort/gpu.py, ops/scan/gpu.py) follows these
definitions, and the numpy reference in stage_runtime.py is the oracle.

    SortSpec   stable sort permutation of rows of key columns (order_keys.py defines the
               order: NaN last both ways, -0.0 == 0.0, descending per key); with k, only the
               first min(k, n) entries (top-k; k=1 is a min-by). Also drives distinct's
               first-occurrence flags (all keys ascending).
    GroupSpec  group_by: rows grouped by equal key bits (order_keys: all NaNs one group,
               -0.0 == 0.0), groups in ascending key order (NaN last), each group's key the
               key of its first row in source order, and per group each GroupAgg over the
               group's rows in source order (see GroupAgg).
    ScanSpec   inclusive running fold: out[i] = combine(..combine(combine(seed, x0), x1).., xi).
               `combine` is associative, maybe not commutative: a backend may group it any
               way that keeps element order (a fixed grouping for a given n: deterministic),
               and applies the seed once per output, at the front.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from . import expr as E
from .expr import Const, Expr
from .program import ParamSpec


@dataclass(frozen=True)
class SortSpec:
    key_dtypes: tuple[str, ...]          # one per key column, the first primary
    descending: tuple[bool, ...]         # per key column
    name: str = "qc_sort"                # kernel name prefix (a C identifier)


@dataclass(frozen=True)
class ScanSpec:
    dtype: str                           # input, accumulator and output type
    combine: Expr                        # over Var("acc", dtype), Var("item", dtype), Params
    seed: Const                          # of `dtype`
    params: tuple[ParamSpec, ...] = ()   # the Params `combine` reads (captured values)
    name: str = "qc_scan"                # kernel name prefix (a C identifier)
    in_order: bool = False               # combine not known associative: the carries are one
                                         # sequential fold of the elements (program.Agg)


@dataclass(frozen=True)
class GroupAgg:
    """One aggregate per group, over the group's rows in source order (program.Agg's ops):

    sum     the values (already of the accumulator dtype) added; floats: a fixed grouping
            per backend (deterministic run to run, whatever the thread count or grid), equal
            to the reference within rounding (the reference: np.add.reduceat)
    min/max np.minimum / np.maximum (NaN wins)
    count   rows in the group (int64; no values)
    any/all logical or / and of bool values
    first   the value of the group's first row
    fold    combine(..combine(seed, x0).., xk) with `combine` over Var acc / item (the
            aggregate rules: associative, maybe not commutative; the seed applied once)
    """
    op: str
    dtype: str                           # value / accumulator / result dtype ("int64" for count)
    combine: Optional[Expr] = None
    seed: Optional[Const] = None
    in_order: bool = False               # a fold not known associative (program.Agg)


@dataclass(frozen=True)
class GroupSpec:
    key_dtypes: tuple[str, ...]
    aggs: tuple[GroupAgg, ...]
    params: tuple[ParamSpec, ...] = ()   # the Params the folds' combines read
    name: str = "qc_group"


def check_combine(combine: Expr, dtype: str, params: tuple, what: str) -> None:
    """A fold's / scan's `combine` may read only Var acc and Var item of `dtype` and the
    Params listed in `params`: ValueError naming `what` otherwise."""
    names = {p.name for p in params}
    for node in E.walk(combine):
        if isinstance(node, E.Var) and (node.name not in ("acc", "item") or node.dtype != dtype):
            raise ValueError(f"{what}: combine reads Var {node.name!r} ({node.dtype}); "
                             f"only acc and item of {dtype} are defined")
        if isinstance(node, E.Param) and node.name not in names:
            raise ValueError(f"{what}: combine reads Param {node.name!r}, not in spec.params")
        if isinstance(node, (E.Load, E.Index)):
            raise ValueError(f"{what}: combine may read acc, item and params only")
