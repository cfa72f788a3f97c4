"""Calls on shaped elements (DESIGN.md section 4b): reductions with axis=, products, norms,
cross products, builders, casts, methods, and NumPy ufuncs applied elementwise.

Reductions follow NumPy's result dtypes (_codegen/dtypes.sum_dtype / mean_dtype: int8 sums in
int64, float16 accumulates in float32). The order is fixed: a balanced pairwise tree (as
NumPy's pairwise summation, within its accuracy). `call(tr, node)` is the translator's hook:
it answers every call whose callee is a supported function or a method of a shaped value,
and NOT_SHAPED for the rest (the translator's own error path).
"""
from __future__ import annotations

import ast
import builtins

import numpy as np

from querycompute._codegen.dtypes import mean_dtype, sum_dtype
from querycompute._codegen.ir.expr import Binary, Call, Cast, Compare, Const, Where
from .shaped import ShapedVal, build, cast, concrete, elementwise, index_key, to_array, wrap
from .translate_calls import KEYWORDS, astype, bind, call_handler, clip, real_imag
from .translate_ops import binary, fail, to_dtype, truthy
from .values import Scalar, TupleVal

NOT_SHAPED = object()
REDUCTIONS = ("sum", "prod", "min", "max", "mean", "any", "all", "argmin", "argmax")
# Callees whose scalar meaning (Python's) differs from NumPy's on arrays: refused on shapes.
SCALAR_ONLY = {builtins.round, builtins.int, builtins.float, builtins.bool, builtins.min,
               builtins.max, builtins.pow}


def _tree(op, xs: list):
    """Combine xs pairwise (balanced): ((x0 op x1) op (x2 op x3)) ..."""
    while len(xs) > 1:
        xs = [op(xs[i], xs[i + 1]) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
    return xs[0]


def _reduce_list(kind: str, xs: list, at: str) -> Scalar:
    """One reduction over a flat list of Scalars (NumPy's result dtype)."""
    d = xs[0].dtype
    if kind in ("any", "all"):
        op = "or" if kind == "any" else "and"
        return Scalar(_tree(lambda a, b: Binary(op, a, b, "bool"), [truthy(x) for x in xs]))
    if kind in ("sum", "prod", "mean"):
        acc, res = mean_dtype(d) if kind == "mean" else sum_dtype(d)
        op = "mul" if kind == "prod" else "add"
        total = _tree(lambda a, b: Binary(op, a, b, acc), [to_dtype(x, acc, at) for x in xs])
        if kind == "mean":
            total = Binary("truediv", total, Const(float(len(xs)), acc), acc)
        return Scalar(_cast(total, res))
    if kind in ("min", "max"):
        if d == "bool":
            op = "and" if kind == "min" else "or"
            return Scalar(_tree(lambda a, b: Binary(op, a, b, "bool"), [x.expr for x in xs]))
        return Scalar(_tree(lambda a, b: Binary(kind, a, b, d), [x.expr for x in xs]))
    # argmin / argmax: the first position holding the extreme m = min/max(xs), which is NaN
    # when any entry is (NumPy: a NaN is the extreme). "x == m or x != x" finds it in both
    # cases (no entry is NaN when m is not). m is shared, never nested in itself: a running
    # (best, pos) chain would nest `best` in every step, a tree that doubles per entry.
    m = _reduce_list("min" if kind == "argmin" else "max", xs, at).expr
    pos = Const(len(xs) - 1, "int64")
    for i in range(len(xs) - 2, -1, -1):
        e = xs[i].expr
        hit = Compare("eq", e, m)
        if d in ("float16", "float32", "float64"):
            hit = Binary("or", hit, Compare("ne", e, e), "bool")
        pos = Where(hit, Const(i, "int64"), pos, "int64")
    return Scalar(pos)


def _cast(e, dtype):
    return e if e.dtype == dtype else Cast(e, dtype)


def reduce(kind: str, v, axis, at: str):
    """v.<kind>(axis=axis) for a shaped value (a Scalar reduces to itself as NumPy's would)."""
    if isinstance(v, ShapedVal) and v.row is not None:
        return v.row.reduce(kind, v.items[0], axis, at)
    arr = concrete(to_array(v, at), at)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if axis is None:
        if kind in ("argmin", "argmax"):
            return _reduce_list(kind, list(arr.flat), at)
        axes = tuple(range(arr.ndim))
    else:
        axes = axis if isinstance(axis, tuple) else (axis,)
        try:
            axes = tuple(sorted({int(a) % arr.ndim if -arr.ndim <= int(a) < arr.ndim else
                                 _bad_axis(a, arr.ndim, at) for a in axes}))
        except TypeError:
            fail(at, f"axis must be a constant int or tuple of ints, got {axis!r}", kind)
        if kind in ("argmin", "argmax") and len(axes) != 1:
            fail(at, f"{kind} takes one axis", kind)
    keep = [a for a in range(arr.ndim) if a not in axes]
    moved = np.transpose(arr, keep + list(axes))
    out_shape = moved.shape[:len(keep)]
    moved = moved.reshape(out_shape + (-1,))
    out = np.empty(out_shape, object)
    for idx in np.ndindex(out_shape):
        out[idx] = _reduce_list(kind, list(moved[idx]), at)
    return wrap(out)


def _bad_axis(a, ndim, at):
    fail(at, f"axis {a} is out of bounds for an element of {ndim} dimension(s)", "axis")


def matmul(a, b, at: str, what: str = "@"):
    """a @ b (NumPy matmul on 1-D / 2-D elements): sums of products in the promoted dtype."""
    rows = [v for v in (a, b) if isinstance(v, ShapedVal) and v.row is not None]
    if rows:                                   # a long row: sum over j of the products
        prod = elementwise(lambda p, q: binary("mul", p, q, at), [a, b], at, what)
        if not (isinstance(a, ShapedVal) and isinstance(b, ShapedVal)):
            return prod if what == "np.dot" else fail(at, "@ needs two rows", "@")
        s = prod.items[0]
        return rows[0].row._step("sum", s.expr, s.dtype)
    x, y = to_array(a, at), to_array(b, at)
    if x.ndim == 0 or y.ndim == 0:
        if what == "np.dot":
            return elementwise(lambda p, q: binary("mul", p, q, at), [a, b], at, what)
        fail(at, "@ needs shaped operands (1-D or 2-D elements), not a scalar", "@")
    if x.ndim > 2 or y.ndim > 2:
        fail(at, f"{what} of elements with more than 2 dimensions is not supported", what)
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    y2 = y.reshape(-1, 1) if y.ndim == 1 else y
    if x2.shape[1] != y2.shape[0]:
        fail(at, f"{what}: shapes {x.shape} and {y.shape} do not align ({x2.shape[1]} != "
                 f"{y2.shape[0]})", what)
    out = np.empty((x2.shape[0], y2.shape[1]), object)
    for i in range(x2.shape[0]):
        for j in range(y2.shape[1]):
            prods = [binary("mul", x2[i, k], y2[k, j], at) for k in range(x2.shape[1])]
            out[i, j] = _tree(lambda p, q: binary("add", p, q, at), prods)
    if x.ndim == 1:
        out = out[0]
    if y.ndim == 1:
        out = out[..., 0]
    return wrap(out)


def norm(v, at: str):
    """np.linalg.norm(x): the 2-norm of the flattened element (Frobenius for matrices);
    integers are converted to float64 first, as NumPy does."""
    if isinstance(v, ShapedVal) and v.row is not None:
        x = v.items[0]
        if x.dtype not in ("float16", "float32", "float64"):
            x = Scalar(to_dtype(x, "float64", at))
        sq = binary("mul", x, x, at)
        return Scalar(Call("sqrt", v.row._step("sum", sq.expr, sq.dtype).expr, sq.dtype))
    arr = concrete(to_array(v, at), at).reshape(-1)
    d = arr[0].dtype
    if d not in ("float16", "float32", "float64"):
        arr = cast(arr, "float64", at)
        d = "float64"
    sq = [binary("mul", s, s, at) for s in arr]
    total = _tree(lambda p, q: binary("add", p, q, at), sq)
    return Scalar(Call("sqrt", total.expr, d))


def cross(a, b, at: str):
    x, y = to_array(a, at), to_array(b, at)
    if x.shape != (3,) or y.shape != (3,):
        fail(at, f"np.cross is supported for 3-vectors, got shapes {x.shape} and {y.shape}",
             "np.cross")

    def mul(i, j):
        return binary("mul", x[i], y[j], at)
    out = np.empty(3, object)
    for k, (i, j) in enumerate(((1, 2), (2, 0), (0, 1))):
        out[k] = binary("sub", mul(i, j), mul(j, i), at)
    return ShapedVal(out)


# --- the translator's hook --------------------------------------------------------------------
def _kw(tr, node: ast.Call, allowed: tuple, name: str) -> dict:
    out = {}
    for k in node.keywords:
        if k.arg not in allowed:
            fail(tr.at(node), f"{name}() keyword {k.arg!r} is not supported here"
                              + (f"; supported: {', '.join(allowed)}" if allowed else ""), name)
        out[k.arg] = k.value
    return out


def _axis(tr, node):
    if node is None:
        return None
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    return index_key(tr, node)


def _dtype_arg(tr, node, at: str) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        obj = node.value
    else:
        obj = tr._callee(node)
    try:
        return np.dtype(obj).name
    except TypeError:
        fail(at, f"{ast.unparse(node)} is not a dtype", "astype")


def _method(tr, node: ast.Call, v: ShapedVal, name: str, at: str):
    args = node.args
    if name in REDUCTIONS:
        kw = _kw(tr, node, ("axis",), name)
        axis = _axis(tr, args[0] if args else kw.get("axis"))
        return reduce(name, v, axis, at)
    _kw(tr, node, (), name)
    if name == "astype":
        dt = _dtype_arg(tr, args[0], at)
        return elementwise(lambda x: Scalar(to_dtype(x, dt, at)), [v], at, "astype")
    if v.row is not None and name in ("transpose", "ravel", "flatten", "copy") and not args:
        return v
    if name == "dot":
        return matmul(v, tr.value(args[0]), at, "dot")
    if name == "transpose" and not args:
        return ShapedVal(v.items.T)
    if name in ("ravel", "flatten") and not args:
        return ShapedVal(v.items.reshape(-1))
    if name == "copy" and not args:
        return v
    if name == "reshape":
        shape = index_key(tr, args[0]) if len(args) == 1 else tuple(index_key(tr, a) for a in args)
        try:
            return wrap(v.items.reshape(shape))
        except (ValueError, TypeError) as exc:
            fail(at, f"reshape{shape!r} of an element of shape {v.shape}: {exc}", "reshape")
    fail(at, f"method .{name}() of a shaped element is not supported; supported: "
             f"{' '.join(REDUCTIONS)} (with axis=), astype dot transpose ravel flatten reshape "
             f"copy", name)


def _dotted(node) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _functions():
    t = {np.sum: "sum", np.prod: "prod", np.min: "min", np.max: "max", np.amin: "min",
         np.amax: "max", np.mean: "mean", np.any: "any", np.all: "all", np.argmin: "argmin",
         np.argmax: "argmax"}
    return t


FUNCS = _functions()


def call(tr, node: ast.Call):
    """The value of a call, or NOT_SHAPED when the translator's own path should answer."""
    at = tr.at(node)
    f = node.func
    if isinstance(f, ast.Attribute) and not (_dotted(f.value) and _is_global(tr, f.value)):
        base = tr.value(f.value)           # a method call on a value: r.sum(), (r * 2).max()
        if isinstance(base, ShapedVal):
            return _method(tr, node, base, f.attr, at)
        if isinstance(base, Scalar):
            return _scalar_method(tr, node, base, f.attr, at)
        return NOT_SHAPED
    obj = tr._callee(f)
    if obj in FUNCS if _hashable(obj) else False:
        kw = _kw(tr, node, ("axis",), ast.unparse(f))
        axis = _axis(tr, node.args[1] if len(node.args) > 1 else kw.get("axis"))
        return reduce(FUNCS[obj], tr.value(node.args[0]), axis, at)
    if obj is builtins.len:
        v = tr.value(node.args[0])
        if isinstance(v, (ShapedVal, TupleVal)):
            n = v.shape[0] if isinstance(v, ShapedVal) else len(v.items)
            return Scalar(Const(n, "int64"), "int")
        fail(at, "len() needs a shaped element or a tuple", "len")
    if obj is np.array or obj is np.asarray:
        kw = _kw(tr, node, ("dtype",), "np.array")
        dtype = _dtype_arg(tr, kw["dtype"], at) if "dtype" in kw else None
        arr = _literal(tr, node.args[0], at)
        return wrap(cast(arr, dtype, at) if dtype else concrete(arr, at))
    if obj in (np.dot, np.matmul, np.vdot, np.inner):
        _kw(tr, node, (), "np.dot")
        a, b = (tr.value(x) for x in node.args)
        return matmul(a, b, at, "np.dot")
    if obj is np.linalg.norm:
        _kw(tr, node, (), "np.linalg.norm")
        v = tr.value(node.args[0])
        if not isinstance(v, ShapedVal):
            fail(at, "np.linalg.norm needs a shaped element (a vector or matrix); for a "
                     "scalar write abs(v)", "np.linalg.norm")
        return norm(v, at)
    if obj is np.cross:
        _kw(tr, node, (), "np.cross")
        return cross(*(tr.value(x) for x in node.args), at)
    if obj is np.transpose:
        return ShapedVal(to_array(tr.value(node.args[0]), at).T)
    handler = call_handler(obj)
    if handler is None or (node.keywords and not (_hashable(obj) and obj in KEYWORDS)):
        return NOT_SHAPED
    nodes = bind(obj, list(node.args), {k.arg: k.value for k in node.keywords}, at)
    args = [_argument(tr, n, obj) for n in nodes]
    if any(isinstance(a, ShapedVal) for a in args):
        if obj in SCALAR_ONLY or getattr(obj, "__module__", None) == "math":
            fail(at, f"{ast.unparse(f)}() works on scalars; on a shaped element use the NumPy "
                     f"function (np.sqrt, np.maximum, r.max(), ...)", "call")
        given = [k for k, a in enumerate(args) if a is not None]

        def apply(*xs):
            full = [None] * len(args)
            for k, x in zip(given, xs):
                full[k] = x
            return handler(full, at)
        return elementwise(apply, [args[k] for k in given], at, ast.unparse(f))
    return handler([a if a is None else tr.check_scalar(a, n, "a function argument")
                    for a, n in zip(args, nodes)], at)


def _argument(tr, n, obj):
    """An argument's value; None for a None literal of a function that takes keywords
    (np.clip(v, None, 5))."""
    if n is None or (isinstance(n, ast.Constant) and n.value is None and obj in KEYWORDS):
        return None
    return tr.value(n)


SCALAR_METHODS = "astype(dtype) clip(lo, hi) conj() conjugate(); attributes .real .imag"


def _scalar_method(tr, node: ast.Call, x: Scalar, name: str, at: str):
    """Methods of a NumPy scalar: v.astype(t), v.clip(lo, hi), v.conj() / v.conjugate()."""
    args = list(node.args)
    if name == "astype":
        _kw(tr, node, (), name)
        if len(args) != 1:
            fail(at, f"astype() takes one dtype argument here, got {len(args)}", name)
        return astype(x, _dtype_arg(tr, args[0], at), at)
    if name == "clip":
        kw = _kw(tr, node, ("min", "max"), name)
        if len(args) > 2:
            fail(at, f"clip() takes at most 2 arguments (min, max), got {len(args)}", name)
        nodes = args + [None] * (2 - len(args))
        for k, key in enumerate(("min", "max")):
            if key in kw:
                if nodes[k] is not None:
                    fail(at, f"clip() got {key!r} twice", name)
                nodes[k] = kw[key]
        bounds = [_argument(tr, n, np.clip) for n in nodes]
        return clip([x] + [b if b is None else tr.check_scalar(b, n, "a clip bound")
                           for b, n in zip(bounds, nodes)], at)
    if name in ("conj", "conjugate"):
        _kw(tr, node, (), name)
        if args:
            fail(at, f"{name}() takes no arguments", name)
        if x.weak:
            return real_imag("real", x, at)        # Python's (2.5).conjugate() is 2.5
        return call_handler(np.conjugate)([x], at)
    fail(at, f"method .{name}() of a scalar is not supported; scalar methods: {SCALAR_METHODS}",
         name)


def _literal(tr, node, at: str) -> np.ndarray:
    """np.array's argument: nested list / tuple literals of values, as an object array."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return build([_literal(tr, e, at) for e in node.elts], at)
    return to_array(tr.value(node), at)


def _hashable(obj) -> bool:
    try:
        hash(obj)
        return True
    except TypeError:
        return False


def _is_global(tr, node) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id not in tr.locals

