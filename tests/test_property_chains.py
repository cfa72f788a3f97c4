"""Property tests: random chains over random inputs (empty, NaN, negative, extreme values).

- the numpy backend against plain-Python evaluation of the same lambdas (the oracle);
- every other backend that runs here against the numpy backend, for every terminal.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import querycompute as qc
from chains import ALL_DTYPES, TRANSCENDENTAL, arrays, chain, load_lambdas, python_oracle
from querycompute.errors import UnsupportedTypeError

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
RUNNABLE = [b for b in ("cpu", "opencl", "cuda", "webgpu") if qc.backends()[b]["available"]]
TERMINALS = ["to_array", "sum", "min", "max", "mean", "count", "any", "all", "first", "agg"]


def build(x, steps):
    q = qc.query(x)
    for (op, _), f in zip(steps, load_lambdas([t for _, t in steps])):
        q = q.select(f) if op == "select" else q.where(f)
    return q


def run_terminal(q, name):
    """The terminal's value, or the exception type it raised (compared across backends)."""
    try:
        if name == "agg":
            return q.agg(total=qc.sum, peak=qc.max, n=qc.count, avg=qc.mean)
        if name in ("min", "max", "mean", "first"):
            return getattr(q, name)(default=None)
        return getattr(q, name)()
    except qc.QueryError as exc:
        return type(exc)


def _float_close(a, b, bound: float, dtype) -> bool:
    a, b = float(a), float(b)
    if a == b or (np.isnan(a) and np.isnan(b)):
        return True
    eps = float(np.finfo(dtype).eps) if np.dtype(dtype).kind == "f" else 0.0
    if not np.isfinite(bound) or bound > float(np.finfo(dtype).max) / 4:
        return True   # the sum overflows in some order: which order overflows first is not defined
    return abs(a - b) <= 4 * eps * bound + 1e-300


def assert_same(got, want, values: np.ndarray):
    """Exact for everything but float sums/means, which may differ by reassociation."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys()
        for k in want:
            assert_same(got[k], want[k], values)
        return
    if isinstance(want, type):
        assert got is want
        return
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want)
        return
    if want is None or isinstance(want, (bool, int)):
        assert got == want
        return
    assert np.asarray(got).dtype == np.asarray(want).dtype, (got, want)
    if np.asarray(want).dtype.kind == "f":
        with np.errstate(all="ignore"):
            bound = float(np.sum(np.abs(values.astype(np.float64)))) if len(values) else 0.0
        assert _float_close(got, want, bound, np.asarray(want).dtype), (got, want)
    else:
        assert got == want


@given(data=st.data(), dtype=st.sampled_from(ALL_DTYPES))
@settings(max_examples=150, **SETTINGS)
def test_numpy_backend_matches_plain_python(data, dtype):
    steps = data.draw(chain(dtype, transcendental=True))
    x = data.draw(arrays(dtype))
    got = build(x, steps).on("numpy").to_array()
    want = python_oracle(x, steps)
    if want:
        assert got.dtype == np.asarray(want[0]).dtype, (steps, got.dtype, type(want[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = np.array(want, dtype=got.dtype)
    if got.dtype.kind == "f" and any(fn.split("(")[0] in t for fn in TRANSCENDENTAL for _, t in steps):
        # NumPy's SIMD array loops and its scalar path may differ by an ulp for exp/tanh/...
        np.testing.assert_allclose(got, expected, rtol=8 * np.finfo(got.dtype).eps,
                                   equal_nan=True, err_msg=str(steps))
    else:
        np.testing.assert_array_equal(got, expected, err_msg=str(steps))


@pytest.mark.parametrize("backend", RUNNABLE)
@given(data=st.data(), dtype=st.sampled_from(ALL_DTYPES), terminal=st.sampled_from(TERMINALS))
@settings(max_examples=25, **SETTINGS)
def test_backend_matches_numpy(backend, data, dtype, terminal):
    if backend == "webgpu":
        assume(np.dtype(dtype).itemsize < 8)    # WGSL has no 64-bit types (tests/test_issue15_*)
    steps = data.draw(chain(dtype))
    x = data.draw(arrays(dtype, max_size=300))
    q = build(x, steps)
    values = q.on("numpy").to_array()
    want = run_terminal(q.on("numpy"), terminal)
    got = run_terminal(q.on(backend), terminal)
    if backend == "webgpu" and got is UnsupportedTypeError and want is not got:
        # NumPy's promotion made a value 64-bit (bool + 1 is int64): refused, the type named
        with pytest.raises(UnsupportedTypeError, match="int64|uint64|float64"):
            run_terminal_raising(q.on(backend), terminal)
        return
    assert_same(got, want, values)


def run_terminal_raising(q, name):
    """run_terminal without catching the QueryError."""
    if name == "agg":
        return q.agg(total=qc.sum, peak=qc.max, n=qc.count, avg=qc.mean)
    return getattr(q, name)(default=None) if name in ("min", "max", "mean", "first") else getattr(q, name)()


def _ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place (NaN against NaN and equal infinities: 0)."""
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(all="ignore"):
        spacing = np.abs(np.spacing(np.maximum(np.abs(a), np.abs(b)).astype(a.dtype)))
        dist = np.where(same, 0.0, np.abs(a.astype(np.float64) - b.astype(np.float64)) / spacing)
    return np.where(np.isnan(dist), np.inf, dist)


@pytest.mark.parametrize("backend", RUNNABLE)
@given(data=st.data(), dtype=st.sampled_from(["float32", "float64"]),
       fn=st.sampled_from(TRANSCENDENTAL))
@settings(max_examples=20, **SETTINGS)
def test_math_functions_agree_with_numpy_within_a_few_ulp(backend, data, dtype, fn):
    """tanh/exp/sin/log1p: each libm (numba's, pocl's, NumPy's SIMD loops) rounds its own
    way, so these are compared by ulp distance (OpenCL allows up to 4-5 ulp for float)."""
    if backend == "webgpu":
        assume(dtype == "float32")              # WGSL has no float64
    x = data.draw(arrays(dtype, max_size=200))
    (f,) = load_lambdas([f"lambda v: {fn.format('v')}"])
    got = qc.query(x).select(f).on(backend).to_array()
    want = qc.query(x).select(f).on("numpy").to_array()
    assert got.dtype == want.dtype
    assert (_ulps_apart(got, want) <= 5).all(), (fn, x[_ulps_apart(got, want) > 5])


# -- CUDA C and Metal: the same random chains, executed by the CPU harness (tests/harness) ----
from querycompute._codegen.errors import UnsupportedType  # noqa: E402

from harness.plans import run_pass  # noqa: E402
from querycompute.run.engine import assemble  # noqa: E402
from querycompute.graph.terminals import AggSpec  # noqa: E402

HARNESS_SIZES = [0, 1, 31, 32, 33, 255, 257, 1000]


AGG = qc.agg(total=qc.sum, peak=qc.max, n=qc.count, avg=qc.mean)


def harness_terminal(name: str):
    """The terminal as run_terminal asks for it (default=None where a default applies)."""
    if name == "agg":
        return AGG
    if name in ("min", "max", "mean", "first"):
        return AggSpec(name, None, None)
    return name


def run_in_harness(q, terminal: str, dialect: str):
    """What the cuda/metal backend would return: the plan's kernels, run on CPU threads."""
    term = harness_terminal(terminal)
    lowered, req, cols, _ = q.lowered(term)
    raw = run_pass(lowered.pass_, dialect, cols, ())
    try:
        return assemble(lowered, raw, req)
    except qc.QueryError as exc:
        return type(exc)


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
@given(data=st.data(), dtype=st.sampled_from(ALL_DTYPES),
       terminal=st.sampled_from(["to_array", "sum", "min", "max", "count", "first", "agg"]))
@settings(max_examples=12, **SETTINGS)
def test_harness_dialects_match_numpy(dialect, data, dtype, terminal):
    steps = data.draw(chain(dtype))
    n = data.draw(st.sampled_from(HARNESS_SIZES))
    seed = data.draw(arrays(dtype, 40))
    x = np.resize(seed if len(seed) else np.zeros(1, dtype), n)   # odd sizes, partial blocks
    q = build(x, steps)
    values = q.on("numpy").to_array()
    want = run_terminal(q.on("numpy"), terminal)
    try:
        got = run_in_harness(q, terminal, dialect)
    except UnsupportedType:
        return                       # float64 on Metal: the clear error is tested elsewhere
    assert_same(got, want, values)
