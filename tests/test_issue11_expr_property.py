"""Issue 11 items 1, 6, 7, 8 as a property: random element expressions over edge values, run
on numpy, cpu, opencl and the CUDA C / Metal kernels (CPU harness), each compared with Python
on NumPy scalars: integer wrap at every width (also under a comparison), float -> int casts
of NaN / inf / out-of-range values, the zero signs of np.minimum / np.maximum, and float `**`
(special values exact, other results within a few ulp: pow is a math function)."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chains import FLOAT_DTYPES, INT_DTYPES
from expr_backends import oracle, same_bits, select_everywhere

SETTINGS = dict(max_examples=20, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def int_values(dtype):
    ii = np.iinfo(dtype)
    edges = [ii.min, ii.min + 1, -1, 0, 1, 2, ii.max - 1, ii.max, ii.max // 2 + 1]
    return st.lists(st.one_of(st.sampled_from([e for e in edges if ii.min <= e <= ii.max]),
                              st.integers(int(ii.min), int(ii.max))), min_size=1, max_size=12)


FLOAT_EDGES = [0.0, -0.0, np.nan, np.inf, -np.inf, -2.5, 0.5, 1.0, -1.0, 300.7, -129.0,
               3e9, -3e9, 1e10, 2.0**63, -2.0**63, 1e19, 2.0**64, 1e20, 65504.0]


def float_values(dtype):
    width = np.dtype(dtype).itemsize * 8
    return st.lists(st.one_of(st.sampled_from(FLOAT_EDGES),
                              st.floats(-1e4, 1e4, width=width)), min_size=1, max_size=12)


@st.composite
def int_expr(draw, dtype):
    signed = np.iinfo(dtype).min < 0
    c = draw(st.sampled_from([1, 2, 3, 7] + ([-1, -2] if signed else [])))
    e = draw(st.sampled_from([f"v + {c}", f"v - {c}", f"v * {c}", "v * v", "-v", "abs(v)",
                              f"v << {abs(c)}", f"v // {c}", f"v % {c}", "v + v + v"]))
    return draw(st.sampled_from([e, f"({e}) > v", f"({e}) // {c} == v", f"({e}) - v"]))


@st.composite
def float_expr(draw, dtype):
    kind = draw(st.sampled_from(["cast", "minmax", "pow"]))
    if kind == "cast":
        return kind, draw(st.sampled_from([f"np.{d}(v)" for d in INT_DTYPES] + ["int(v)"]))
    if kind == "minmax":
        c = draw(st.sampled_from(["0.0", "-0.0", "v", "-v", "1.0"]))
        return kind, draw(st.sampled_from([f"np.minimum(v, {c})", f"np.maximum({c}, v)",
                                           f"min(v, {c})", f"max({c}, v)"]))
    return kind, f"v ** {draw(st.sampled_from(['2', '-1', '0.5', '3', '1.5', '-2', '0', '1']))}"


def _pow_close(got, want):
    """pow: special values (inputs or results of 0 / inf / NaN) exact, others within 4 ulp."""
    exact = same_bits(got, want)
    finite = np.isfinite(want) & (want != 0) & np.isfinite(got)
    with np.errstate(all="ignore"):
        near = finite & (np.abs(got.astype(np.float64) - want.astype(np.float64))
                         <= 4 * np.abs(np.spacing(want)).astype(np.float64))
    return exact | near


@given(data=st.data(), dtype=st.sampled_from(INT_DTYPES))
@settings(**SETTINGS)
def test_item1_property_integer_wrap_every_backend(data, dtype):
    x = np.array(data.draw(int_values(dtype)), dtype)
    texts = [data.draw(int_expr(dtype)) for _ in range(3)]
    lam = f"lambda v: ({', '.join(texts)},)"
    want = oracle(x, lam)
    for backend, got in select_everywhere(x, lam).items():
        for t, g, w in zip(texts, got, want):
            assert g.dtype == w.dtype and (g == w).all(), (backend, dtype, t, x, g, w)


@given(data=st.data(), dtype=st.sampled_from(FLOAT_DTYPES))
@settings(**SETTINGS)
def test_item6_7_8_property_casts_zero_signs_pow_every_backend(data, dtype):
    with np.errstate(all="ignore"):
        x = np.array(data.draw(float_values(dtype)), np.float64).astype(dtype)
    drawn = [data.draw(float_expr(dtype)) for _ in range(3)]
    # int(v) is an int64 in the lambda language; Python's int() would raise on NaN / inf
    lam = f"lambda v: ({', '.join(t for _, t in drawn)},)"
    want = oracle(x, lam.replace("int(v)", "np.int64(v)"))
    for backend, got in select_everywhere(x, lam).items():
        if got is None:
            continue                          # Metal: no float64
        for (kind, t), g, w in zip(drawn, got, want):
            assert g.dtype == w.dtype, (backend, t, g.dtype, w.dtype)
            ok = _pow_close(g, w) if kind == "pow" else same_bits(g, w)
            assert ok.all(), (backend, dtype, t, x[~ok], g[~ok], w[~ok])
