"""Every expression op of codegen.expr, over every dtype, on the cpu (numba) backend,
compared with NumPy on edge values (0, -1, INT_MIN/MAX, NaN, inf, -0.0, float16 subnormals).

One Pass per dtype carries every op as a separate output, so each dtype compiles once.
"""
import itertools

import numpy as np
import pytest

from querycompute._codegen import dtypes as D
from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir.program import ElementProgram, InputSpec, Let, ParamSpec, Pass, ToArray
from querycompute.backends.cpu.cpu import CpuBackend

BACKEND = CpuBackend()


def run(prog: ElementProgram, inputs, n=None, params=()):
    p = Pass(prog, ToArray(), "t")
    n = len(inputs[0]) if n is None else n
    return BACKEND.prepare(p).run_quick(inputs, params, n)[0]


def edge_values(d: str) -> np.ndarray:
    if d == "bool":
        return np.array([False, True])
    if D.is_int(d):
        lo, hi = D.int_limits(d)
        w = D.bits(d)
        vals = [0, 1, 2, 3, 7, 100, w - 1, w, w + 1, hi, hi - 1]
        if D.is_signed(d):
            vals += [-1, -2, -7, -100, -w, lo, lo + 1]
        return np.array(vals, dtype=d)
    info = np.finfo(d)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, -2.5, 2.5, 3.0, -7.0, 0.1, np.nan, np.inf, -np.inf,
            float(info.max), -float(info.max), float(info.tiny), float(info.smallest_subnormal),
            1e4, -3.75]
    if d == "float16":
        vals += [6e-5, -6e-8, 65504.0, 2.0 ** -24, 3 * 2.0 ** -24, 0.333]
    return np.array(vals, dtype=d)


def pairs(d: str):
    """Every pair of edge values plus random values, as two arrays."""
    v = edge_values(d)
    a, b = (np.array(t, dtype=d) for t in zip(*itertools.product(v, v)))
    rng = np.random.default_rng(1)
    if D.is_float(d):
        ra = (rng.standard_normal(300) * 100).astype(d)
        rb = (rng.standard_normal(300) * 10).astype(d)
    elif d == "bool":
        ra, rb = rng.random(300) < 0.5, rng.random(300) < 0.5
    else:
        lo, hi = D.int_limits(d)
        ra = rng.integers(lo, hi, 300, dtype=d, endpoint=True)
        rb = rng.integers(lo, hi, 300, dtype=d, endpoint=True)
    return np.concatenate([a, ra]), np.concatenate([b, rb])


def same(got: np.ndarray, want: np.ndarray, what: str):
    """Bit-identical, NaN payloads aside; names the first differing element."""
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind == "f":
        nan = np.isnan(want)
        ok = (np.isnan(got) == nan) & (nan | (got.view(f"u{got.itemsize}") ==
                                              want.view(f"u{want.itemsize}")))
    else:
        ok = got == want
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, f"{what}: {bad.size} differ, first at {bad[0]}: got {got[bad[0]]!r} want {want[bad[0]]!r}"


def close(got, want, what, ulps):
    assert got.dtype == want.dtype, what
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"{what}: NaN positions differ"
    g, w = got[~nan].astype(np.float64), want[~nan].astype(np.float64)
    spacing = np.abs(np.spacing(want[~nan])).astype(np.float64)
    inf = np.isinf(w)
    assert np.array_equal(g[inf], w[inf]), f"{what}: infinities differ"
    err = np.abs(g - w)[~inf] / np.maximum(spacing[~inf], np.finfo(want.dtype).smallest_subnormal)
    assert err.size == 0 or err.max() <= ulps, f"{what}: off by {err.max()} ulp"


def int_pow(a, b):
    neg = b < 0
    r = np.power(a, np.where(neg, 0, b).astype(a.dtype))
    return np.where(neg, np.zeros((), a.dtype), r).astype(a.dtype)


# (op, numpy reference, applicable dtypes)
ARITH = ["add", "sub", "mul", "floordiv", "mod", "pow", "min", "max"]
BITS = ["bitand", "bitor", "bitxor", "lshift", "rshift"]
NP_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
             "floordiv": np.floor_divide, "mod": np.remainder, "min": np.minimum,
             "max": np.maximum, "bitand": np.bitwise_and, "bitor": np.bitwise_or,
             "bitxor": np.bitwise_xor, "lshift": np.left_shift, "rshift": np.right_shift,
             "and": np.logical_and, "or": np.logical_or, "hypot": np.hypot,
             "atan2": np.arctan2, "copysign": np.copysign}
NP_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
          "eq": np.equal, "ne": np.not_equal}
EXACT_FUNCS = ("sqrt", "floor", "ceil", "trunc", "rint")


def binary_ops(d):
    if d == "bool":
        return ["bitand", "bitor", "bitxor", "and", "or"]
    if D.is_int(d):
        return ARITH + BITS
    return ARITH + ["truediv", "hypot", "atan2", "copysign"]


def expected_binary(op, a, b, d):
    if op == "pow":
        return int_pow(a, b) if D.is_int(d) else np.power(a, b)
    return NP_BINARY[op](a, b).astype(d)


@pytest.mark.parametrize("d", D.ALL)
def test_binary_compare_unary_ops_match_numpy(d):
    a, b = pairs(d)
    A, B = E.Load(0, d), E.Load(1, d)
    outs, names = [], []
    for op in binary_ops(d):
        outs.append(E.Binary(op, A, B, d)); names.append(op)
    for op in NP_CMP:
        outs.append(E.Compare(op, A, B)); names.append(op)
    unary = ["not"] if d == "bool" else ["neg", "abs"] + (["invert"] if D.is_int(d) else [])
    for op in unary:
        outs.append(E.Unary(op, A, d)); names.append(op)
    outs.append(E.Where(E.Compare("lt", A, B), A, B, d)); names.append("where")
    prog = ElementProgram((InputSpec("a", d), InputSpec("b", d)), (), (), tuple(outs))
    got = run(prog, [a, b])
    with np.errstate(all="ignore"):
        for name, g in zip(names, got):
            if name in NP_CMP:
                want = NP_CMP[name](a, b)
            elif name == "not":
                want = np.logical_not(a)
            elif name in ("neg", "abs", "invert"):
                want = {"neg": np.negative, "abs": np.abs, "invert": np.invert}[name](a)
            elif name == "where":
                want = np.where(a < b, a, b)
            else:
                want = expected_binary(name, a, b, d)
            if name in ("pow", "hypot", "atan2") and D.is_float(d):
                close(g, want.astype(d), f"{d} {name}", ulps=2)
            else:
                same(g, np.asarray(want, dtype=g.dtype if name in NP_CMP else d), f"{d} {name}")


@pytest.mark.parametrize("d", D.FLOATS)
def test_float_functions_and_predicates(d):
    a, _ = pairs(d)
    A = E.Load(0, d)
    fns = E.FLOAT_FUNCS + E.FLOAT_PREDICATES
    outs = tuple(E.Call(fn, A, "bool" if fn in E.FLOAT_PREDICATES else d) for fn in fns)
    got = run(ElementProgram((InputSpec("a", d),), (), (), outs), [a])
    with np.errstate(all="ignore"):
        for fn, g in zip(fns, got):
            want = getattr(np, fn)(a)
            if fn in E.FLOAT_PREDICATES or fn in EXACT_FUNCS:
                same(g, want, f"{d} {fn}")
            else:
                close(g, want, f"{d} {fn}", ulps=4)


@pytest.mark.parametrize("src", D.ALL)
def test_casts_to_every_dtype(src):
    a, _ = pairs(src)
    outs = tuple(E.Cast(E.Load(0, src), dst) for dst in D.ALL)
    got = run(ElementProgram((InputSpec("a", src),), (), (), outs), [a])
    for dst, g in zip(D.ALL, got):
        if D.is_float(src) and D.is_int(dst):
            # NaN/inf/out-of-range float -> int is undefined (NumPy warns): compare the rest
            lo, hi = D.int_limits(dst)
            ok = np.isfinite(a) & (np.trunc(a.astype(np.float64)) >= lo) & \
                (np.trunc(a.astype(np.float64)) <= hi)
            with np.errstate(all="ignore"):
                same(g[ok], a[ok].astype(dst), f"{src}->{dst}")
        else:
            with np.errstate(all="ignore"):
                same(g, a.astype(dst), f"{src}->{dst}")


def test_float16_rounding_is_numpys_on_every_bit_pattern():
    """All 65536 float16 bit patterns: x + x, x * 1.1 (double to half rounding via float32
    vs float64 paths), x / 3 and a float64 -> float16 cast of x / 3.0 match NumPy."""
    a = np.arange(65536, dtype=np.uint16).view(np.float16)
    A = E.Load(0, "float16")
    three = E.Const(3.0, "float16")
    outs = (E.Binary("add", A, A, "float16"),
            E.Binary("mul", A, E.Const(float(np.float16(1.1)), "float16"), "float16"),
            E.Binary("truediv", A, three, "float16"),
            E.Cast(E.Binary("truediv", E.Cast(A, "float64"), E.Const(3.0, "float64"), "float64"),
                   "float16"))
    got = run(ElementProgram((InputSpec("a", "float16"),), (), (), outs), [a])
    with np.errstate(all="ignore"):
        same(got[0], a + a, "x + x")
        same(got[1], a * np.float16(1.1), "x * 1.1")
        same(got[2], a / np.float16(3), "x / 3")
        same(got[3], (a.astype(np.float64) / 3.0).astype(np.float16), "f64 -> f16")


def test_params_index_lets_and_strided_inputs():
    """Params are passed at run time (no recompile), Index counts source positions, Lets are
    reused, and a strided view reads the right elements."""
    x = np.arange(30, dtype=np.int32)[::3]
    X, K = E.Load(0, "int32"), E.Param("k", "int32")
    prog = ElementProgram(
        (InputSpec("x", "int32"),), (ParamSpec("k", "int32"),),
        (Let("y", E.Binary("mul", X, K, "int32")),),
        (E.Binary("add", E.Var("y", "int32"), E.Cast(E.Index(), "int32"), "int32"),))
    for k in (2, -5):
        got = run(prog, [x], params=[np.int32(k)])
        same(got[0], (x * np.int32(k) + np.arange(10, dtype=np.int32)).astype(np.int32), f"k={k}")


def test_float32_arithmetic_is_not_contracted_into_fma():
    """a * b + c rounded twice (NumPy) differs from fma(a, b, c) on these values."""
    rng = np.random.default_rng(7)
    a, b, c = (rng.standard_normal(5000).astype(np.float32) for _ in range(3))
    A, B, C = (E.Load(k, "float32") for k in range(3))
    prog = ElementProgram(tuple(InputSpec(nm, "float32") for nm in "abc"), (), (),
                          (E.Binary("add", E.Binary("mul", A, B, "float32"), C, "float32"),))
    same(run(prog, [a, b, c])[0], a * b + c, "a*b+c")
