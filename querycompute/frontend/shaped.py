"""Shaped element values (DESIGN.md section 4b) by scalarization.

An element of shape `s` (a vec3, a mat3x3, a row of k values) is a `ShapedVal`: a NumPy
object array of shape `s` whose entries are `Scalar` expressions (the loads of its scalar
columns, or expressions built from them). Every operation of section 4b unrolls into the
existing scalar expression IR at translation time -- elementwise ops apply the scalar
operator per entry after NumPy broadcasting of the object arrays, indexing is NumPy's own
indexing of the object array, reductions and products are trees of scalar operators -- so
every backend and dialect runs shaped lambdas with no kernel change. The cost is program
size, hence the cap on element sizes (querycompute/sources/shaped.py, MAX_SCALARS).

This module: the value, conversions, elementwise operators, attributes and indexing.
Reductions, products and calls live in shaped_calls.py.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np

from querycompute._codegen.ir.expr import Const
from .translate_ops import binary, fail, select, to_dtype, unary
from .values import WEAK_DTYPE, Scalar, TupleVal


@dataclass(frozen=True, eq=False)
class ShapedVal:
    items: np.ndarray      # object array (ndim >= 1) of Scalar
    row: object = None     # a long row: its shaped_rows.RowContext (items: the entry, (1,))

    @property
    def shape(self) -> tuple:
        return (self.row.k,) if self.row is not None else self.items.shape

    @property
    def dtype(self) -> str:
        return common_dtype(list(self.items.flat)) if self.items.size else "float64"


def is_shaped(v) -> bool:
    return isinstance(v, ShapedVal)


def map_items(v: ShapedVal, fn) -> ShapedVal:
    out = np.empty(v.shape, object)
    for idx in np.ndindex(v.shape):
        out[idx] = fn(v.items[idx])
    return ShapedVal(out)


def common_dtype(scalars: list) -> str:
    """The dtype np.array([...]) gives these values: Python scalars count as their default
    concrete dtype (np.array([np.float32(1), 1.0]) is float64)."""
    dts = [WEAK_DTYPE[s.weak] if s.weak else s.dtype for s in scalars]
    return np.result_type(*dts).name if dts else "float64"


def wrap(arr: np.ndarray):
    """An object array of Scalars as a value: 0-d -> the Scalar itself."""
    if arr.ndim == 0:
        return arr[()]
    return ShapedVal(arr)


def to_array(v, at: str, what: str = "an operand") -> np.ndarray:
    """A value as an object array of Scalars: a Scalar is 0-d, a tuple is an array of its
    items (as NumPy reads `r + (1, 2, 3)`), all of one dtype like np.array would make."""
    if isinstance(v, ShapedVal):
        return v.items
    if isinstance(v, Scalar):
        out = np.empty((), object)
        out[()] = v
        return out
    if isinstance(v, TupleVal):
        return build([to_array(i, at, what) for i in v.items], at)
    fail(at, f"{what} is a record; shaped elements combine with numbers, shaped elements and "
             f"tuples of numbers", "shaped")


def build(parts: list, at: str, dtype: str | None = None) -> np.ndarray:
    """np.array([...]) of values (each an object array): stacked along a new first axis and
    cast to one dtype (NumPy's rule for array creation, or `dtype`)."""
    shapes = {p.shape for p in parts}
    if len(shapes) != 1:
        fail(at, f"np.array / a tuple of values needs items of one shape, got "
                 f"{sorted(shapes)}", "np.array")
    arr = np.empty((len(parts),) + parts[0].shape, object)
    for i, p in enumerate(parts):
        arr[i, ...] = p            # (element-wise: a 0-d part is its Scalar)
    return cast(arr, dtype or common_dtype(list(arr.flat)), at)


def cast(arr: np.ndarray, dtype: str, at: str) -> np.ndarray:
    out = np.empty(arr.shape, object)
    for idx in np.ndindex(arr.shape):
        s = arr[idx]
        out[idx] = s if s.dtype == dtype and not s.weak else Scalar(to_dtype(s, dtype, at))
    return out


def concrete(arr: np.ndarray, at: str) -> np.ndarray:
    """Weak Python scalars in an array become their concrete dtype (arrays hold NumPy types)."""
    if all(not s.weak for s in arr.flat):
        return arr
    return cast(arr, common_dtype(list(arr.flat)), at)


def elementwise(fn, args: list, at: str, what: str):
    """fn(*scalars) at every position of the broadcast shape of args (values)."""
    from .shaped_rows import check_mix, context_of
    ctx = context_of(args)
    if ctx is not None:
        check_mix(args, at)
    arrays = [to_array(a, at) for a in args]
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        fail(at, f"{what}: element shapes {' and '.join(str(a.shape) for a in arrays)} do not "
                 f"broadcast (NumPy's rules: equal sizes or 1, aligned from the right)", what)
    arrays = [np.broadcast_to(a, shape) for a in arrays]
    out = np.empty(shape, object)
    for idx in np.ndindex(shape):
        out[idx] = fn(*(a[idx] for a in arrays))
    return ShapedVal(out, ctx) if ctx is not None else wrap(out)


def binop(op: str, a, b, at: str):
    """a op b with at least one shaped operand (op: an IR binary or comparison name)."""
    return elementwise(lambda x, y: binary(op, x, y, at), [a, b], at, f"the operator {op}")


def operator(op: str | None, a, b, at: str):
    """A binary operator with a shaped operand; op None is `@` (matrix product)."""
    if op is None:
        from .shaped_calls import matmul
        return matmul(a, b, at)
    return binop(op, a, b, at)


def unop(op: str, a, at: str):
    return elementwise(lambda x: unary(op, x, at), [a], at, f"the operator {op}")


def where(cond: Scalar, a, b, at: str):
    """`a if cond else b` with shaped branches: both broadcast, the choice per entry."""
    return elementwise(lambda x, y: select(cond, x, y, at), [a, b], at, "a conditional")


def refuse_truth(at: str, construct: str):
    fail(at, f"{construct} needs one truth value but a shaped element has several (NumPy "
             f"raises here too); reduce it first: r.any(), r.all(), (r > 0).all()", construct)


# --- attributes and indexing -----------------------------------------------------------------
def const_tuple(values) -> TupleVal:
    return TupleVal(tuple(Scalar(Const(int(v), "int64"), "int") for v in values))


def attribute(v: ShapedVal, name: str, at: str):
    if v.row is not None and name in ("T", "shape", "ndim", "size"):
        return v if name == "T" else const_tuple(v.shape) if name == "shape" else \
            Scalar(Const(1 if name == "ndim" else v.row.k, "int64"), "int")
    if name == "T":
        return ShapedVal(v.items.T)
    if name == "shape":
        return const_tuple(v.shape)
    if name in ("ndim", "size"):
        return Scalar(Const(int(getattr(v.items, name)), "int64"), "int")
    fail(at, f"attribute .{name} of a shaped element is not supported; supported: .T .shape "
             f".ndim .size and the methods sum prod min max mean any all argmin argmax dot "
             f"astype transpose ravel flatten reshape", "attribute")


def index_key(tr, node: ast.AST):
    """A constant index: ints (negative too), slices with constant bounds, None, `...`, and
    tuples of these. Anything computed per element is refused (no gathers inside elements)."""
    if isinstance(node, ast.Tuple):
        return tuple(index_key(tr, e) for e in node.elts)
    if isinstance(node, ast.Slice):
        parts = [None if p is None else _const_int(tr, p) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)
    if isinstance(node, ast.Constant) and (node.value is None or node.value is Ellipsis):
        return node.value
    return _const_int(tr, node)


def _const_int(tr, node):
    v = tr.value(node)
    if isinstance(v, Scalar) and v.weak == "int" and isinstance(v.expr, Const):
        return int(v.expr.value)
    fail(tr.at(node), "a shaped element is indexed with constants only (r[0], R[1, 2], r[1:3], "
                      "r[-1], R[:, 0]); an index computed per element is not supported", "index")


def index(v: ShapedVal, key, at: str):
    if v.row is not None:
        fail(at, f"indexing a long row (of {v.row.k} values) is not supported; reduce it "
                 f"(r.sum(), r.max(), ...) or query the column X[:, j]", "index")
    try:
        out = v.items[key]
    except (IndexError, TypeError, ValueError) as exc:
        fail(at, f"index {key!r} is invalid for an element of shape {v.shape}: {exc}", "index")
    if isinstance(out, np.ndarray):
        if out.size == 0:
            fail(at, f"index {key!r} selects nothing from an element of shape {v.shape}; "
                     f"empty elements are not supported", "index")
        return wrap(out)
    return out
