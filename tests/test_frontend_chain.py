"""parse_chain: CLI query text -> method calls, never executed; plus random expressions
translated from text and checked against Python evaluating the same text on NumPy scalars."""
import ast
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from querycompute._codegen.ir.expr import Load, Param
from querycompute.errors import UnsupportedLambdaError
from querycompute.frontend import ChainOp, LambdaSource, Scalar, capture_values, parse_chain, translate
from test_frontend_translate import evaluate, same


def test_simple_chain():
    ops = parse_chain("select(lambda v: v*2).where(lambda v: v > 1000).sum()")
    assert [op.method for op in ops] == ["select", "where", "sum"]
    assert isinstance(ops[0], ChainOp) and ops[2].args == () and ops[2].kwargs == {}
    lam = ops[1].args[0]
    assert isinstance(lam, LambdaSource) and lam.code is None and lam.filename == "<query>"
    assert lam.text == "lambda v: v > 1000" and lam.params == ("v",)
    assert ast.unparse(lam.body) == "v > 1000"


@pytest.mark.parametrize("prefix", ["", "q.", "query(x).", "qc.query(a, b).", "."])
def test_leading_source_is_ignored(prefix):
    ops = parse_chain(prefix + "where(lambda v: v > 0).count()")
    assert [op.method for op in ops] == ["where", "count"]


def test_agg_specs_constants_and_keywords():
    ops = parse_chain("agg(total=qc.sum, peak=qc.max(lambda v: v*v), n=qc.count)"
                      ".first(default=-1.5)")
    agg = ops[0]
    assert agg.kwargs["total"] == ("agg_spec", "sum", None)
    kind, name, lam = agg.kwargs["peak"]
    assert (kind, name, lam.text) == ("agg_spec", "max", "lambda v: v*v")
    assert agg.kwargs["n"] == ("agg_spec", "count", None)
    assert ops[1] == ChainOp("first", (), {"default": -1.5})
    assert parse_chain("aggregate(lambda a, b: a + b, 0)")[0].args[1] == 0


def test_modules_and_builtins_are_available():
    (op,) = parse_chain("select(lambda v: np.sqrt(v) + math.floor(v) + abs(v))")
    src = op.args[0]
    env = capture_values(None, src)
    assert env["np"] is np and env["math"] is math and env["abs"] is abs
    out = translate(src, (Scalar(Load(0, "float32")),), env, Param)
    assert out.dtype == "float32"


@pytest.mark.parametrize("text, words", [
    ("select(lambda v: v * k)", ["'k'", "use a constant", "<query>:1:22"]),
    ("select(lambda v: v * 2", ["not a valid expression"]),
    ("select(print('hi'))", ["print('hi')", "never executed"]),
    ("agg(total=qc.median)", ["qc.median", "qc.sum"]),
    ("agg(total=qc.sum(1, 2))", ["one lambda"]),
    ("select(lambda v, k=1: v)", ["default values"]),
    ("select(*fs)", ["unpacking"]),
    ("1 + 2", ["chain of method calls"]),
])
def test_errors(text, words):
    with pytest.raises(UnsupportedLambdaError) as e:
        parse_chain(text)
    for w in words:
        assert w in str(e.value)


# --- random expressions: text -> IR vs Python on the same text --------------------------
DTYPES = ["int8", "int32", "int64", "uint8", "uint32", "float16", "float32", "float64", "bool"]
LEAVES = ["v", "w", "2", "-3", "1.5", "0.25", "True"]
BINOPS = ["+", "-", "*", "/", "//", "%", "&", "|", "^", "<", "<=", "==", "!="]
FUNCS = ["abs({})", "np.sqrt({})", "math.sqrt({})", "np.floor({})", "float({})", "bool({})",
         "(-{})", "(~{})", "(not {})", "np.float32({})", "np.isnan({})", "np.sign({})"]


def exprs():
    def extend(children):
        return st.one_of(
            st.tuples(children, st.sampled_from(BINOPS), children).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(FUNCS), children).map(lambda t: t[0].format(t[1])),
            st.tuples(children, children, children).map(
                lambda t: f"({t[0]} if {t[1]} else {t[2]})"))
    return st.recursive(st.sampled_from(LEAVES), extend, max_leaves=6)


def _value(dtype, draw_int, draw_float):
    if dtype == "bool":
        return np.bool_(draw_int % 2)
    if dtype.startswith("float"):
        return np.dtype(dtype).type(draw_float)
    info = np.iinfo(dtype)
    return np.dtype(dtype).type(min(max(draw_int, int(info.min)), int(info.max)))


@settings(max_examples=300, deadline=None)
@given(expr=exprs(), dv=st.sampled_from(DTYPES), dw=st.sampled_from(DTYPES),
       ints=st.tuples(st.integers(-300, 300), st.integers(-300, 300)),
       floats=st.tuples(st.sampled_from([-2.5, -0.0, 0.5, 3.0, 1e4, float("nan"), float("inf")]),
                        st.sampled_from([-1.0, 0.0, 2.0, 7.5])))
def test_random_expressions_match_python(expr, dv, dw, ints, floats):
    text = f"lambda v, w: {expr}"
    v, w = _value(dv, ints[0], floats[0]), _value(dw, ints[1], floats[1])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = eval(text, {"np": np, "math": math})(v, w)
        except (ValueError, ZeroDivisionError, OverflowError):
            return      # Python raises where a kernel gives nan/0 (math.sqrt(-1), 1 // 0)
        except TypeError:
            if " if " in expr:
                return  # Python types the branch taken (np.sign(True) raises); we promote
                        # both branches like np.where, so the expression is well typed here
            with pytest.raises(UnsupportedLambdaError):
                _translate(text, dv, dw)
            return
    try:
        result = _translate(text, dv, dw)
    except UnsupportedLambdaError as e:
        # Python never evaluates the branch not taken; we type both, so a type error there
        # is rejected. Otherwise Python int literals NumPy 2 refuses too (np.int8(1) + 300)
        # are the only rejections.
        assert (" if " in expr or "out of bounds" in str(e)
                or "negative integer powers" in str(e)), (text, e)
        return
    if " if " in expr:
        return      # branches promote together like np.where, not like Python: tested apart
    if isinstance(expected, np.generic):
        assert result.weak is None and result.dtype == expected.dtype.name, (text, result)
    else:
        assert result.weak == type(expected).__name__, (text, result, expected)
    got = evaluate(result.expr, [v, w], {})
    if "sqrt" not in expr:
        assert same(got, expected), (text, v, w, got, expected)


def _translate(text, dv, dw):
    (op,) = parse_chain(f"select({text})")
    src = op.args[0]
    return translate(src, (Scalar(Load(0, dv)), Scalar(Load(1, dw))),
                     capture_values(None, src), Param)
