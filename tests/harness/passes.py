"""Hand-built Passes covering every kernel shape, with what NumPy computes for them.

The harness property tests (tests/test_harness_plans.py) run each through the cuda and metal
plans on the CPU and compare with `expected(...)`, which computes the same thing with NumPy
directly (element-by-element NumPy 2 semantics, as DESIGN.md section 4 specifies).
"""
from __future__ import annotations

import numpy as np

from querycompute._codegen import dtypes
from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir.program import Agg, ElementProgram, Filter, InputSpec, Let, Pass, Reduce, ToArray

THRESHOLD = 10   # filters keep x > THRESHOLD: representable in every dtype, drops NaN


def sum_dtype(d: str) -> str:
    """np.sum's accumulator; float16 accumulates in float32 (DESIGN.md section 4)."""
    if d == "float16":
        return "float32"
    if dtypes.is_signed(d) or d == "bool":
        return "int64"
    if dtypes.is_unsigned(d):
        return "uint64"
    return d


def _x(d):
    return E.Load(0, d)


def _gt(d):
    return E.Compare("gt", _x(d), E.Const(THRESHOLD if d != "bool" else True, d))


def _program(d, body=(), outputs=()):
    return ElementProgram(inputs=(InputSpec("x", d),), params=(), body=tuple(body),
                          outputs=tuple(outputs))


def passes(d: str) -> dict[str, Pass]:
    """kind -> Pass for element dtype d. Kinds: map, where, reduce_filtered, reduce_plain."""
    x = _x(d)
    if d == "bool":
        keep = Filter(x)
        out = {
            "map": _program(d, outputs=(E.Unary("not", x, d), E.Index())),
            "where": _program(d, body=(keep,), outputs=(E.Index(),)),
        }
        reduce_filtered = Reduce((Agg("count", (), "int64"), Agg("first", (E.Index(),), "int64")))
        reduce_plain = Reduce((Agg("any", (x,), "bool"), Agg("all", (x,), "bool"),
                               Agg("count", (), "int64")))
    else:
        one, three = E.Const(1 if dtypes.is_int(d) else 1.0, d), E.Const(3 if dtypes.is_int(d) else 3.0, d)
        v = E.Var("v", d)
        acc = sum_dtype(d)
        out = {
            "map": _program(d, outputs=(E.Binary("add", E.Binary("mul", x, three, d), one, d), E.Index())),
            "where": _program(d, body=(Let("v", E.Binary("sub", x, one, d)), Filter(_gt(d))),
                              outputs=(v, E.Index())),
        }
        reduce_filtered = Reduce((Agg("sum", (E.Cast(x, acc) if acc != d else x,), acc),
                                  Agg("min", (x,), d), Agg("max", (x,), d),
                                  Agg("count", (), "int64"), Agg("first", (x,), "int64")))
        plain = [Agg("min", (x,), d), Agg("max", (x,), d),
                 Agg("any", (_gt(d),), "bool"), Agg("all", (_gt(d),), "bool")]
        if dtypes.is_int(d):
            item, a = E.Var("item", d), E.Var("acc", d)
            plain.append(Agg("fold", (x,), d, combine=E.Binary("bitxor", a, item, d),
                             seed=E.Const(0, d)))
        reduce_plain = Reduce(tuple(plain))
    result = {k: Pass(prog, ToArray(), f"h_{k}_{d}") for k, prog in out.items()}
    filtered_prog = _program(d, body=(Filter(x if d == "bool" else _gt(d)),), outputs=(x,))
    result["reduce_filtered"] = Pass(filtered_prog, reduce_filtered, f"h_rf_{d}")
    result["reduce_plain"] = Pass(_program(d, outputs=(x,)), reduce_plain, f"h_rp_{d}")
    return result


def _identity(op: str, d: str):
    t = np.dtype(d).type
    if dtypes.is_float(d):
        return t(np.inf if op == "min" else -np.inf)
    info = np.iinfo(d)
    return t(info.max if op == "min" else info.min)


def expected(kind: str, d: str, x: np.ndarray):
    """NumPy's answer for passes(d)[kind] on x, in the raw-result format of backends/base.py."""
    t = np.dtype(d).type
    idx = np.arange(len(x), dtype=np.int64)
    with np.errstate(all="ignore"):
        if d == "bool":
            if kind == "map":
                return (~x, idx)
            if kind == "where":
                return (idx[x],)
            if kind == "reduce_filtered":
                first = int(idx[x][0]) if x.any() else -1
                return [int(x.sum()), (first, (np.int64(first),) if first >= 0 else (np.int64(0),))]
            return [bool(x.any()), bool(x.all()), len(x)]
        keep = x > t(THRESHOLD)
        if kind == "map":
            return (x * t(3) + t(1), idx)
        if kind == "where":
            return ((x - t(1))[keep], idx[keep])
        if kind == "reduce_filtered":
            v = x[keep]
            acc = np.dtype(sum_dtype(d)).type
            total = v.astype(acc).sum(dtype=acc) if len(v) else acc(0)
            first = int(idx[keep][0]) if len(v) else -1
            return [total,
                    np.min(v) if len(v) else _identity("min", d),
                    np.max(v) if len(v) else _identity("max", d),
                    len(v), (first, (v[0] if len(v) else t(0),))]
        out = [np.min(x) if len(x) else _identity("min", d),
               np.max(x) if len(x) else _identity("max", d),
               bool(keep.any()), bool(keep.all())]
        if dtypes.is_int(d):
            out.append(np.bitwise_xor.reduce(x) if len(x) else t(0))
        return out


def data(d: str, n: int, seed: int) -> np.ndarray:
    """n values of dtype d: the whole range plus the edge values (NaN, +-inf, -0.0, extremes)."""
    rng = np.random.default_rng(seed)
    if d == "bool":
        return rng.random(n) < 0.3
    if dtypes.is_int(d):
        lo, hi = dtypes.int_limits(d)
        x = rng.integers(lo, hi, n, dtype=d, endpoint=True)
        edges = [lo, hi, 0, THRESHOLD, THRESHOLD + 1]
    else:
        x = (rng.standard_normal(n) * 100).astype(d)
        edges = [np.nan, np.inf, -np.inf, -0.0, np.finfo(d).max, np.finfo(d).smallest_subnormal, 11.0]
    if n:
        pos = rng.integers(0, n, min(n, len(edges)))
        x[pos] = np.array(edges[:len(pos)], dtype=d)
    return x


def assert_same(kind: str, d: str, got, want) -> None:
    """Raw results `got` equal NumPy's `want`: bit-exact, except float sums (tree order)."""
    if kind in ("map", "where"):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)   # bit-exact (NaN == NaN here)
        return
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, tuple):                   # first: (index, values)
            assert g[0] == w[0], f"agg {i}: first index {g[0]} != {w[0]}"
            if w[0] >= 0:
                np.testing.assert_array_equal(np.array(g[1]), np.array(w[1]))
        elif isinstance(w, (bool, int)):
            assert g == w, f"agg {i}: {g} != {w}"
        elif dtypes.is_float(np.dtype(type(w)).name) and i == 0 and kind == "reduce_filtered":
            # a float sum: the plan's fixed tree order vs NumPy's pairwise order
            assert np.dtype(type(g)) == np.dtype(type(w))
            np.testing.assert_allclose(g, w, rtol=2e-6 if np.dtype(type(w)).itemsize >= 4 else 1e-3)
        else:
            assert np.dtype(type(g)) == np.dtype(type(w)), f"agg {i}: {type(g)} vs {type(w)}"
            np.testing.assert_array_equal(g, w, err_msg=f"agg {i}")
