"""Generated OpenCL C executed on pocl through the opencl ocl, compared with NumPy
computing the same thing: every kernel shape, every dtype, edge values, strided inputs."""
from __future__ import annotations

import numpy as np
import pytest

from querycompute._codegen import dtypes as D
from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir import program as P

import gpu_passes as G

SIZES = (0, 1, 31, 32, 33, 255, 257, 1000, 65537)
TRANSCENDENTAL = {"pow", "hypot", "atan2", "exp", "log1p"}   # may differ by the library's ulp


_prepared: dict = {}


def run(ocl, p: P.Pass, inputs, params=(), n=None):
    if p not in _prepared:
        _prepared[p] = ocl.prepare(p)
    n = len(inputs[0]) if n is None else n
    return _prepared[p].run_quick(list(inputs), list(params), n)[0]


def sample(dtype: str, n: int, seed: int) -> np.ndarray:
    """Random values of `dtype` with the type's edge values mixed in."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(n) < 0.5
    if D.is_int(dtype):
        lo, hi = D.int_limits(dtype)
        x = rng.integers(lo, hi, n, dtype=dtype, endpoint=True)
        small = rng.integers(-9 if lo < 0 else 0, 10, n).astype(dtype)
        x = np.where(rng.random(n) < 0.5, small, x)
        edges = np.array([lo, hi, 0, 1, (-1 if lo < 0 else 2), lo + 1, hi - 1], dtype=dtype)
    else:
        x = (rng.standard_normal(n) * 50).astype(dtype)
        edges = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5, 7.0, -7.0, 1e-30], dtype=dtype)
    x[: min(n, len(edges))] = edges[: min(n, len(edges))]
    return x


def numpy_binary(op, a, b):
    if op == "pow" and D.is_int(a.dtype.name):
        return np.where(b < 0, 0, np.power(a, np.where(b < 0, 0, b))).astype(a.dtype)
    if op in ("and", "or"):
        return getattr(np, f"logical_{op}")(a, b)
    names = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
             "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "min": "minimum",
             "max": "maximum", "bitand": "bitwise_and", "bitor": "bitwise_or", "bitxor": "bitwise_xor",
             "lshift": "left_shift", "rshift": "right_shift", "hypot": "hypot", "atan2": "arctan2",
             "copysign": "copysign"}
    return getattr(np, names[op])(a, b)


def numpy_expr(e: E.Expr, a, b):
    """NumPy's value of an ops_program output (inputs a, b)."""
    if isinstance(e, E.Binary):
        return numpy_binary(e.op, a, b)
    if isinstance(e, E.Compare):
        return getattr(np, {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
                            "eq": "equal", "ne": "not_equal"}[e.op])(a, b)
    if isinstance(e, E.Unary):
        return {"neg": np.negative, "abs": np.abs, "invert": np.invert, "not": np.logical_not}[e.op](a)
    if isinstance(e, E.Cast):
        return a.astype(e.dtype)
    fn = {"arcsin": "arcsin"}.get(e.fn, e.fn)
    return getattr(np, fn)(a)


def comparable(e: E.Expr, a) -> np.ndarray:
    """Where NumPy defines the result (float -> int casts of NaN/inf/out-of-range don't)."""
    if isinstance(e, E.Cast) and D.is_float(a.dtype.name) and D.is_int(e.dtype):
        lo, hi = D.int_limits(e.dtype)
        with np.errstate(invalid="ignore"):
            t = np.trunc(a.astype(np.float64))
            return np.isfinite(t) & (t >= lo) & (t <= hi)
    return np.ones(len(a), bool)


def assert_same(got, want, exact: bool, what: str):
    assert got.dtype == want.dtype, what
    if want.dtype.kind == "f":
        both_nan = np.isnan(got) & np.isnan(want)
        if exact:
            bits = got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")
            bad = ~(bits | both_nan)
        else:
            rtol = {2: 2e-3, 4: 4e-6, 8: 1e-13}[want.itemsize]
            with np.errstate(invalid="ignore"):
                bad = ~(both_nan | np.isclose(got, want, rtol=rtol, atol=0) | (got == want))
        assert not bad.any(), f"{what}: first mismatch at {np.flatnonzero(bad)[:5]}: got {got[bad][:5]} want {want[bad][:5]}"
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("dtype", G.ALL_DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "strided", "small"])
def test_elementwise_ops_match_numpy(ocl, dtype, layout):
    p = P.Pass(G.ops_program(dtype), P.ToArray(), f"qc_ops_{dtype}")
    n = {"contiguous": 1000, "strided": 700, "small": 33}[layout]
    step = 3 if layout == "strided" else 1
    a, b = sample(dtype, n * step, 1)[::step], sample(dtype, n * step, 2)[::-1][::step]
    got = run(ocl, p, [a, b])
    with np.errstate(all="ignore"):
        for k, e in enumerate(p.program.outputs):
            want = np.asarray(numpy_expr(e, a, b)).astype(e.dtype)
            mask = comparable(e, a)
            name = getattr(e, "op", getattr(e, "fn", type(e).__name__ + "->" + e.dtype))
            exact = name not in TRANSCENDENTAL
            assert_same(got[k][mask], want[mask], exact, f"{dtype} output {k} ({name})")


def filter_reference(dtype, x, lo):
    keep = x if dtype == "bool" else (x > lo)
    with np.errstate(over="ignore"):
        y = (x | x) if dtype == "bool" else (x + x)
    return keep, y


def low_param(dtype):
    if dtype == "bool":
        return False
    return 0 if D.is_signed(dtype) or D.is_float(dtype) else D.int_limits(dtype)[1] // 2


@pytest.mark.parametrize("dtype", G.ALL_DTYPES)
def test_compaction_keeps_source_order(ocl, dtype):
    p = P.Pass(G.filter_program(dtype), P.ToArray(), f"qc_filter_{dtype}")
    lo = low_param(dtype)
    for n in SIZES:
        x = sample(dtype, n, n)
        keep, y = filter_reference(dtype, x, lo)
        got = run(ocl, p, [x], [np.dtype(dtype).type(lo)])
        np.testing.assert_array_equal(got[1], np.flatnonzero(keep), err_msg=f"n={n}")
        assert_same(got[0], x[keep], True, f"x n={n}")
        assert_same(got[2], y[keep], True, f"y n={n}")


def test_compaction_of_strided_input(ocl):
    p = P.Pass(G.filter_program("float32"), P.ToArray(), "qc_filter_float32")
    base = sample("float32", 3 * 65537, 5)
    for x in (base[::3], base[::-2], base[::40]):
        keep, _ = filter_reference("float32", x, 0.0)
        got = run(ocl, p, [x], [np.float32(0.0)])
        np.testing.assert_array_equal(got[0], x[keep])
        np.testing.assert_array_equal(got[1], np.flatnonzero(keep))


def reduce_reference(dtype, x, lo):
    keep, y = filter_reference(dtype, x, lo)
    kx, s = x[keep], G.sum_dtype(dtype)
    idx = np.flatnonzero(keep)
    first = (int(idx[0]), (x[idx[0]], y[idx[0]])) if len(idx) else (-1, None)
    want = [kx.astype(s).sum(dtype=s), int(keep.sum()), first, bool((kx != 0).any()), bool((kx != 0).all())]
    if dtype != "bool":
        hi_id = np.inf if D.is_float(dtype) else D.int_limits(dtype)[1]
        lo_id = -np.inf if D.is_float(dtype) else D.int_limits(dtype)[0]
        mn = kx.min() if len(kx) else np.dtype(dtype).type(hi_id)
        mx = kx.max() if len(kx) else np.dtype(dtype).type(lo_id)
        want += [mn, mx, mx]
    return want


@pytest.mark.parametrize("dtype", G.ALL_DTYPES)
def test_reduction_of_every_agg_in_one_pass(ocl, dtype):
    p = P.Pass(G.filter_program(dtype), P.Reduce(G.reduce_aggs(dtype)), f"qc_reduce_{dtype}")
    lo = low_param(dtype)
    for n in SIZES:
        x = sample(dtype, n, 100 + n)
        got = run(ocl, p, [x], [np.dtype(dtype).type(lo)])
        want = reduce_reference(dtype, x, lo)
        what = f"{dtype} n={n}"
        if D.is_float(G.sum_dtype(dtype)):
            scale = float(np.abs(x[np.isfinite(x)]).astype(np.float64).sum()) + 1.0
            assert got[0] == want[0] or abs(float(got[0]) - float(want[0])) <= 1e-5 * scale, what
        else:
            assert got[0] == want[0], what
        assert got[0].dtype == np.dtype(G.sum_dtype(dtype)), what
        assert got[1] == want[1] and got[3] == want[3] and got[4] == want[4], what
        assert got[2][0] == want[2][0], what
        if want[2][0] >= 0:
            assert_same(np.array(got[2][1]), np.array(want[2][1]), True, what)
        for g, w in zip(got[5:], want[5:]):
            assert_same(np.array([g]), np.array([w], dtype), True, what)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_min_max_propagate_nan_and_results_are_deterministic(ocl, dtype):
    x = E.Load(0, dtype)
    aggs = (P.Agg("min", (x,), dtype), P.Agg("max", (x,), dtype),
            P.Agg("sum", (E.Cast(x, G.sum_dtype(dtype)),), G.sum_dtype(dtype)))
    p = P.Pass(P.ElementProgram((P.InputSpec("x", dtype),), (), (), ()), P.Reduce(aggs), f"qc_nan_{dtype}")
    data = (np.random.default_rng(7).standard_normal(65537) * 1e3).astype(dtype)
    mn, mx, total = run(ocl, p, [data])
    assert mn == data.min() and mx == data.max()
    again = run(ocl, p, [data])
    assert np.array([total]).tobytes() == np.array([again[2]]).tobytes()
    for view in (data[::2], data[::-1], data[::9]):     # device gather, then two host copies
        mn, mx, _ = run(ocl, p, [view])
        assert mn == view.min() and mx == view.max()
    for at in (0, 4000, 65536):
        with_nan = data.copy()
        with_nan[at] = np.nan
        mn, mx, _ = run(ocl, p, [with_nan])
        assert np.isnan(mn) and np.isnan(mx), f"NaN at {at} lost"


def test_empty_reduction_gives_identities(ocl):
    p = P.Pass(G.filter_program("int32"), P.Reduce(G.reduce_aggs("int32")), "qc_reduce_int32")
    got = run(ocl, p, [np.empty(0, np.int32)], [np.int32(0)])
    assert got[:2] == [0, 0] and got[2] == (-1, got[2][1]) and got[3] is False and got[4] is True
    assert got[5] == np.iinfo(np.int32).max and got[6] == np.iinfo(np.int32).min


def test_trace_records_each_kernel_and_reuse(ocl):
    p = P.Pass(G.filter_program("float32"), P.ToArray(), "qc_trace_float32")
    prepared = ocl.prepare(p)
    x = sample("float32", 5000, 3)
    first = prepared.trace_rows(prepared.run_quick([x], [np.float32(0)], len(x))[1])
    second = prepared.trace_rows(prepared.run_quick([x], [np.float32(0)], len(x))[1])
    names = [k.name for k in first]
    assert names == ["qc_trace_float32_compact_count", "qc_trace_float32_compact_scan_partials",
                     "qc_trace_float32_compact_scan_blocks", "qc_trace_float32_compact_scan_downsweep",
                     "qc_trace_float32_compact_scatter"]
    assert first[0].cache == "compiled" and first[0].compile_ms > 0
    assert all(k.cache == "memory" and k.compile_ms == 0 for k in second)
    # outputs include the int64 index: 16 / 8 = 2 elements per thread, 512 per block
    assert first[0].grid == (10,) and first[1].grid == (1,) and first[0].block == (256,)
