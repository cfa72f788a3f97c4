"""translate: lambda AST -> typed IR. Each lambda is checked against Python itself calling it
on NumPy scalars: the IR must be well typed, have the dtype (and weak/strong kind) of what
Python returns, and evaluate (with the tiny NumPy evaluator below) to the same value."""
import functools
import math
import warnings
from math import sqrt as msqrt

import numpy as xp

import numpy as np
import pytest

from querycompute._codegen import dtypes
from querycompute._codegen.ir.expr import (Binary, Call, Cast, Compare, Const, Load, Param, Unary, Where,
                          walk)
from querycompute.errors import UnsupportedLambdaError
from querycompute.frontend.exact import derived_value, is_derived
from querycompute.frontend import (RecordVal, Scalar, TupleVal, capture_values,
                                   lambda_source, translate)

UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
          "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
          "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
          "lshift": np.left_shift, "rshift": np.right_shift, "min": np.minimum,
          "max": np.maximum, "and": np.logical_and, "or": np.logical_or, "hypot": np.hypot,
          "atan2": np.arctan2, "copysign": np.copysign, "lt": np.less, "le": np.less_equal,
          "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
          "neg": np.negative, "invert": np.invert, "not": np.logical_not, "abs": np.absolute}


def evaluate(e, inputs, params):
    """The IR's value on NumPy scalars, checking every node's operand types on the way."""
    def ev(n):
        if isinstance(n, Const):
            return np.dtype(n.dtype).type(n.value)
        if isinstance(n, Param):
            return np.array(params[n.name]).astype(n.dtype)[()]
        if isinstance(n, Load):
            assert inputs[n.input].dtype == n.dtype
            return inputs[n.input]
        if isinstance(n, Cast):
            return np.array(ev(n.x)).astype(n.dtype)[()]
        if isinstance(n, Where):
            assert n.cond.dtype == "bool" and n.a.dtype == n.b.dtype == n.dtype
            return ev(n.a) if ev(n.cond) else ev(n.b)
        if isinstance(n, Call):
            assert dtypes.is_float(n.x.dtype)
            assert n.dtype == ("bool" if n.fn.startswith("is") else n.x.dtype)
            return getattr(np, n.fn)(ev(n.x))
        if isinstance(n, Unary):
            assert n.x.dtype == n.dtype
            return UFUNCS[n.op](ev(n.x))
        if isinstance(n, Compare):
            assert n.a.dtype == n.b.dtype and n.dtype == "bool"
            return UFUNCS[n.op](ev(n.a), ev(n.b))
        assert isinstance(n, Binary) and n.a.dtype == n.b.dtype == n.dtype, n
        return UFUNCS[n.op](ev(n.a), ev(n.b))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = ev(e)
    assert out.dtype == e.dtype, (out.dtype, e)
    return out


def run_ir(fn, arg_dtypes, values, env_extra=None):
    src = lambda_source(fn)
    env = capture_values(fn, src)
    params = {}

    def new_param(name, dtype):     # a weak sub-expression of captures: its exact value
        params[name] = derived_value(name, dtype, env, "", "") if is_derived(name) else env[name]
        return Param(name, dtype)
    args = tuple(Scalar(Load(i, d)) for i, d in enumerate(arg_dtypes))
    result = translate(src, args, env, new_param)
    scalars = [np.dtype(d).type(v) for d, v in zip(arg_dtypes, values)]
    return result, evaluate(result.expr, scalars, params)


def same(a, b):
    a, b = np.float64(a), np.float64(b)
    return (np.isnan(a) and np.isnan(b)) or a == b


def check(fn, arg_dtypes, values, exact=True, oracle=None):
    """Python on NumPy scalars (or `oracle`, its NumPy spelling) vs our IR: type, weakness
    and value."""
    scalars = [np.dtype(d).type(v) for d, v in zip(arg_dtypes, values)]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = (oracle or fn)(*scalars)
        except (ValueError, ZeroDivisionError, OverflowError):
            return          # Python raises where a kernel can't (math.sqrt(-1), int(nan))
        except TypeError:   # NumPy has no such operation for these types: neither have we
            with pytest.raises(UnsupportedLambdaError):
                run_ir(fn, arg_dtypes, values)
            return
    result, got = run_ir(fn, arg_dtypes, values)
    if isinstance(expected, np.generic):
        assert result.weak is None and result.expr.dtype == expected.dtype.name, (result, expected)
    else:
        kind = type(expected).__name__
        if kind == "int" and result.weak is None:   # int(v)/round(v) of a column: int64 (guide)
            assert result.expr.dtype == "int64", (result, expected)
        else:
            assert result.weak == kind, (result, expected)
    if exact:
        assert same(got, expected), (got, expected, result)
    else:
        assert math.isclose(float(got), float(expected), rel_tol=1e-6) or same(got, expected)


K_INT = 7
K_FLOAT = 0.5
K_BOOL = True
K_F32 = np.float32(1.25)

INT_VALUES = [-7, -1, 0, 3, 100]
FLOAT_VALUES = [-2.5, -0.0, 0.5, 2.5, 1000.25, float("nan"), float("inf")]

ARITH = [
    lambda v: v * 2, lambda v: v + 1.5, lambda v: v - K_INT, lambda v: v * K_FLOAT,
    lambda v: v / 2, lambda v: v // 3, lambda v: v % 3, lambda v: -v, lambda v: +v,
    lambda v: v ** 2, lambda v: 2 ** 3 * v, lambda v: (v + 1) * (v - 1) / 4,
    lambda v: v // -2, lambda v: v % -3, lambda v: v * K_F32, lambda v: abs(v),
    lambda v: v > 1, lambda v: 0 < v <= 3,
    lambda v: v == 3 or v != v, lambda v: not v, lambda v: bool(v), lambda v: float(v), lambda v: int(v) if v == v and abs(v) < 1e9 else 0,
    lambda v: round(v) if v == v and abs(v) < 1e9 else 0, lambda v: v * K_BOOL, lambda v: K_INT // 2 + v,
]
INT_ONLY = [lambda v: v & 6, lambda v: v | 1, lambda v: v ^ K_INT, lambda v: v << 2,
            lambda v: v >> 1, lambda v: ~v, lambda v: v // 0, lambda v: v % 0]
MATH = [lambda v: math.sqrt(v), lambda v: math.floor(v) if v == v and abs(v) < 1e9 else 0,
        lambda v: math.isnan(v), lambda v: math.exp(v), lambda v: math.fabs(v),
        lambda v: math.hypot(v, 2), lambda v: math.atan2(v, 1), lambda v: math.copysign(2, v),
        lambda v: math.pow(abs(v), 0.5), lambda v: math.sin(v) * math.pi,
        lambda v: np.sqrt(v), lambda v: np.exp(v), lambda v: np.floor(v), lambda v: np.rint(v),
        lambda v: np.isnan(v), lambda v: np.isfinite(v), lambda v: np.abs(v),
        lambda v: np.minimum(v, 2), lambda v: np.maximum(v, np.nan), lambda v: np.hypot(v, 3),
        lambda v: np.arctan2(v, 2), lambda v: np.sign(v), lambda v: np.float32(v) * 2,
        lambda v: np.int16(v) if v == v and abs(v) < 1e4 else np.int16(0), lambda v: np.round(v),
        lambda v: np.power(v, 2), lambda v: np.copysign(v, -1), lambda v: np.fabs(v)]
def sample_values(dtype):
    if dtype == "bool":
        return [True, False]
    if dtypes.is_float(dtype):
        return FLOAT_VALUES
    return [abs(v) for v in INT_VALUES] if dtypes.is_unsigned(dtype) else INT_VALUES


TRANSCENDENTAL = ("exp", "sin", "arctan2", "atan2", "hypot")
NUMBERS = ["bool", "int8", "int32", "int64", "uint8", "uint64", "float16", "float32", "float64"]


@pytest.mark.parametrize("dtype", NUMBERS)
@pytest.mark.parametrize("fn", ARITH + MATH, ids=lambda f: lambda_source(f).text[10:])
def test_matches_python_on_numpy_scalars(fn, dtype):
    values = sample_values(dtype)
    exact = not any(t in lambda_source(fn).text for t in TRANSCENDENTAL)
    for value in values:
        check(fn, (dtype,), (value,), exact=exact)


@pytest.mark.parametrize("dtype", NUMBERS)
@pytest.mark.parametrize("fn, oracle", [
    (lambda v: min(v, 3), lambda v: np.minimum(v, 3)),
    (lambda v: max(v, 1, K_INT), lambda v: np.maximum(np.maximum(v, 1), K_INT)),
    (lambda v: max(v, np.nan), lambda v: np.maximum(v, np.nan)),
    (lambda v: min(K_INT, 2.5) + v, lambda v: 2.5 + v),
    # branches are promoted together, as np.where would
    (lambda v: v if v > 0 else 0, lambda v: np.result_type(v, 0).type(v if v > 0 else 0)),
    (lambda v: v if v else 1.5, lambda v: np.result_type(v, 1.5).type(v if v else 1.5)),
], ids=lambda f: lambda_source(f).text[10:])
def test_numpy_flavoured_builtins_and_ternary(fn, oracle, dtype):
    for value in sample_values(dtype):
        check(fn, (dtype,), (value,), oracle=oracle)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int64", "uint16", "uint64", "bool"])
@pytest.mark.parametrize("fn", INT_ONLY, ids=lambda f: lambda_source(f).text[10:])
def test_integer_operators(fn, dtype):
    values = [True, False] if dtype == "bool" else [abs(v) if dtypes.is_unsigned(dtype) else v
                                                    for v in INT_VALUES]
    for value in values:
        check(fn, (dtype,), (value,))


@pytest.mark.parametrize("a, b", [("uint8", "int8"), ("int64", "uint64"), ("int32", "float32"),
                                  ("float16", "int8"), ("bool", "int8"), ("bool", "bool"),
                                  ("uint64", "float32"), ("int16", "uint32")])
@pytest.mark.parametrize("fn, oracle", [
    (lambda x, y: x + y, None), (lambda x, y: x * y, None), (lambda x, y: x / y, None),
    (lambda x, y: x < y, None), (lambda x, y: x == y, None),
    (lambda x, y: max(x, y), lambda x, y: np.maximum(x, y)),
    (lambda x, y: x if x > y else y, lambda x, y: np.result_type(x, y).type(x if x > y else y)),
], ids=lambda f: lambda_source(f).text[13:] if f else "-")
def test_mixed_operands_nep50(fn, oracle, a, b):
    for xv, yv in [(1, 2), (0, 1), (3, 0)] + ([(-3, 2), (2, -3)] if "uint" not in a + b else []):
        if "bool" in (a, b):
            xv, yv = (bool(xv) if a == "bool" else xv), (bool(yv) if b == "bool" else yv)
        check(fn, (a, b), (xv, yv), oracle=oracle)


@pytest.mark.parametrize("case, expected", [
    ((lambda v: v * 2, "float32"), "float32"), ((lambda v: v * 1.5, "int32"), "float64"),
    ((lambda v: v + 1, "int8"), "int8"), ((lambda v: np.sqrt(v), "int8"), "float16"),
    ((lambda v: np.sqrt(v), "int32"), "float64"), ((lambda v: v / v, "int32"), "float64"),
    ((lambda v: v + v, "bool"), "bool"), ((lambda v: math.sqrt(v), "float32"), "float64"),
    ((lambda v: np.floor(v), "float32"), "float32"), ((lambda v: round(v), "float32"), "int64"),
])
def test_nep50_table(case, expected):
    fn, dtype = case
    result, _ = run_ir(fn, (dtype,), (1,))
    assert result.expr.dtype == expected


def test_captured_scalars_become_params_and_new_values_give_same_ir():
    def make(k):
        return lambda v: v * k + k
    irs = []
    for k in (2, 3.5, np.float32(4)):
        fn = make(k)
        src = lambda_source(fn)
        made = []
        result = translate(src, (Scalar(Load(0, "float32")),), capture_values(fn, src),
                           lambda name, dtype: made.append((name, dtype)) or Param(name, dtype))
        assert len(made) == 1               # one Param per capture, however often it is read
        irs.append((made[0][1], result))
        assert not any(isinstance(n, Const) for n in walk(result.expr))
    assert irs[0][0] == "int64" and irs[1][0] == "float64" and irs[2][0] == "float32"
    # NEP 50: a captured Python int or float adopts float32; a numpy float32 is float32 too
    assert [ir.expr.dtype for _, ir in irs] == ["float32"] * 3
    assert [ir.weak for _, ir in irs] == [None] * 3
    fn2 = make(5)
    src = lambda_source(fn2)
    again = translate(src, (Scalar(Load(0, "float32")),), capture_values(fn2, src), Param)
    assert again == irs[0][1]


def test_records_tuples_and_literals():
    rec = RecordVal((("price", Scalar(Load(0, "float32"))), ("qty", Scalar(Load(1, "int32")))))
    fn = lambda r: {"total": r.price * r["qty"], "pair": (r.qty, -r.qty)}  # noqa: E731
    out = translate(lambda_source(fn), (rec,), {}, Param)
    assert isinstance(out, RecordVal) and out.names == ("total", "pair")
    assert out.get("total").dtype == "float64"      # float32 * int32 -> float64
    assert isinstance(out.get("pair"), TupleVal) and len(out.get("pair").items) == 2
    tup = TupleVal((Scalar(Load(0, "int8")), Scalar(Load(1, "float32"))))
    fn = lambda t: t[-1] + t[0]  # noqa: E731
    assert translate(lambda_source(fn), (tup,), {}, Param).dtype == "float32"


def test_int8_chain_keeps_int8_and_wraps():
    result, got = run_ir(lambda v: v * 3 + 1, ("int8",), (100,))
    assert result.expr.dtype == "int8" and got == np.int8(45)


def test_constant_folding_with_python_semantics():
    result, _ = run_ir(lambda v: v + (-7 // 2) * 2 ** 3 + 7 % -3, ("int64",), (0,))
    consts = [n.value for n in walk(result.expr) if isinstance(n, Const)]
    assert consts == [-32, -2]


def test_out_of_range_comparison_is_exact():
    result, got = run_ir(lambda v: v < 300, ("int8",), (5,))
    assert isinstance(result.expr, Const) and got
    result, got = run_ir(lambda v: v > -1, ("uint8",), (0,))
    assert result.expr == Const(True, "bool")


def err(fn, arg_dtypes=("float32",), env=None):
    src = lambda_source(fn)
    with pytest.raises(UnsupportedLambdaError) as e:
        translate(src, tuple(Scalar(Load(i, d)) for i, d in enumerate(arg_dtypes)),
                  capture_values(fn, src) if env is None else env, Param)
    assert e.value.where.startswith(__file__ + ":")
    return e.value


CAPTURED_LIST = [1, 2]
CAPTURED_ARRAY = np.arange(3)
CAPTURED_TEXT = "abc"


def my_function(v):
    return v


my_callable = functools.partial(my_function)      # not a helper function (issue 33: those inline)


class Box:
    k = 2


@pytest.mark.parametrize("fn, dtypes_, words", [
    (lambda v: v + CAPTURED_LIST[0], ("float32",), ["CAPTURED_LIST", "list", "only scalars"]),
    (lambda v: v * CAPTURED_ARRAY, ("float32",), ["CAPTURED_ARRAY", "ndarray"]),
    (lambda v: CAPTURED_TEXT, ("float32",), ["CAPTURED_TEXT", "str"]),
    (lambda v: my_callable(v), ("float32",), ["my_callable", "supported calls"]),
    (lambda v: my_function(v, 1), ("float32",), ["my_function() takes 1 argument"]),
    (lambda v: Box.k * v, ("float32",), ["Box.k", "local scalar"]),
    (lambda v: v.nbytes, ("float32",), [".nbytes", "records"]),
    (lambda v: [v], ("float32",), ["list literal"]),
    (lambda v: sum(x for x in (v,)), ("float32",), ["sum"]),
    (lambda v: (v > 0) and v, ("float32",), ["`and` needs bool", "&"]),
    (lambda v: v and v, ("int32",), ["`and` needs bool"]),
    (lambda v: round(v, 2), ("float32",), ["round(x, ndigits)"]),
    (lambda v: np.int8(v) + 300, ("float32",), ["300 out of bounds for int8"]),
    (lambda v: np.int8(300) + v, ("float32",), ["300 out of bounds for int8"]),
    (lambda v: v ** -1, ("int32",), ["negative integer powers"]),
    (lambda v: v - v, ("bool",), ["boolean subtract"]),
    (lambda v: v << 1, ("float32",), ["<<"]),
    (lambda v: v @ v, ("float32",), ["@"]),
    (lambda v: v is None, ("float32",), ["`v is None`", "left_join"]),
    (lambda v: v[0], ("float32",), ["indexing a scalar"]),
    (lambda v: math.log(v, 2), ("float32",), ["math.log(x, base)"]),
    (lambda v: v.tolist(), ("float32",), [".tolist()", "scalar methods: astype"]),
    (lambda v: np.linalg.norm(v), ("float32",), ["np.linalg.norm"]),
    (lambda v: np.complex64(v), ("float32",), ["complex64"]),
    (lambda v: f"{v}", ("float32",), ["f-string"]),
    (lambda v: 1 // 0 + v, ("float32",), ["fails in Python"]),
    (lambda a, b: a + b, ("float32",), ["2 parameter(s)"]),
])
def test_unsupported_constructs_are_named(fn, dtypes_, words):
    message = str(err(fn, dtypes_))
    for w in words:
        assert w in message, message


def test_field_errors_list_the_fields():
    rec = RecordVal((("price", Scalar(Load(0, "float32"))),))
    fn = lambda r: r.cost  # noqa: E731
    with pytest.raises(UnsupportedLambdaError, match="no field 'cost'; fields: price"):
        translate(lambda_source(fn), (rec,), {}, Param)
    fn = lambda r: r[5]  # noqa: E731
    with pytest.raises(UnsupportedLambdaError, match="constant field name"):
        translate(lambda_source(fn), (rec,), {}, Param)
    tup = TupleVal((Scalar(Load(0, "float32")),))
    fn = lambda t: t[3]  # noqa: E731
    with pytest.raises(UnsupportedLambdaError, match="out of range"):
        translate(lambda_source(fn), (tup,), {}, Param)


F32 = np.float32


def test_functions_and_modules_are_resolved_by_identity():
    result, got = run_ir(lambda v: msqrt(v) + xp.sqrt(v) + F32(v), ("float32",), (1.0,))
    assert result.dtype == "float32" and got == 3.0  # math.sqrt gives a weak Python float
    calls = [n.fn for n in walk(result.expr) if isinstance(n, Call)]
    assert calls == ["sqrt", "sqrt"]


def test_captured_int_that_does_not_fit_int64_is_rejected():
    big = 2 ** 70
    with pytest.raises(UnsupportedLambdaError, match="'big'.*64"):
        run_ir(lambda v: v + big, ("int64",), (1,))
