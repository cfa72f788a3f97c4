"""Issue 15, the webgpu backend's gaps: NumPy's 64-bit sums from 32-bit words, storage bindings
in windows, the pipeline operators' column operations, and kernel timings.

Runs where a WebGPU adapter exists (CI: Mesa's lavapipe with WGPU_BACKEND_TYPE=Vulkan).
"""
from __future__ import annotations

import os

os.environ.setdefault("WGPU_BACKEND_TYPE", "Vulkan")     # before the device opens

import numpy as np
import pytest

import querycompute as qc

WEBGPU = qc.backends()["webgpu"]
needs_adapter = pytest.mark.skipif(not WEBGPU["available"], reason=f"no WebGPU adapter: {WEBGPU['reason']}")


def _both(x, run):
    """run(query) on webgpu and on numpy (the oracle)."""
    return run(qc.query(*x).on("webgpu")), run(qc.query(*x).on("numpy"))


def _same(got, want):
    assert type(got) is type(want), (got, want)
    if isinstance(want, dict):
        assert got.keys() == want.keys()
        for k in want:
            _same(got[k], want[k])
    else:
        assert got == want, (got, want)


# ---- item 2: 64-bit results from 32-bit words -----------------------------------------------
@needs_adapter
@pytest.mark.parametrize("dtype", ["int32", "uint32", "int8", "uint8", "int16", "bool"])
def test_item2_int64_sums_and_means_of_narrow_integers_are_exact(dtype):
    """NumPy sums bool and <= 32-bit integers in int64 / uint64 and means them in float64:
    the kernels carry those sums in two u32 words (carries between them, sign extension),
    so sums far outside 32 bits come out exact, in NumPy's types."""
    rng = np.random.default_rng(11)
    n = 300_000                                  # 2 stages, many blocks: partials combined
    if dtype == "bool":
        x = rng.integers(0, 2, n).astype(bool)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
        x[:1000] = info.max                      # one-sided runs: carries into the high word
    keep = (lambda v: v) if dtype == "bool" else (lambda v: v > 0)     # (bool > 0 would be int64)
    got, want = _both((x,), lambda q: (q.sum(), q.mean(), q.where(keep).sum(),
                                        q.agg(s=qc.sum, m=qc.mean, n=qc.count, hi=qc.max)))
    for g, w in zip(got, want):
        _same(g, w)


@needs_adapter
def test_item2_sums_beyond_32_bits_in_tables_folds_and_negative_totals():
    """An int32 column summing past 2^32 both ways, in a table's agg and next to a fold (the
    order-keeping reduction shape)."""
    n = 2_000_000
    big = np.full(n, 2 ** 31 - 1, np.int32)
    small = np.full(n, -2 ** 31, np.int32)
    for on in ("webgpu", "numpy"):
        t = qc.query(a=big, b=small).on(on)
        res = (t.agg(a=qc.sum(lambda r: r.a), b=qc.sum(lambda r: r.b), m=qc.mean(lambda r: r.b)),
               qc.query(big).on(on).agg(s=qc.sum, last=qc.aggregate(lambda acc, v: v, np.int32(0))))
        if on == "webgpu":
            got = res
        else:
            want = res
    for g, w in zip(got, want):
        _same(g, w)
    assert want[0]["b"] == np.int64(n) * -2 ** 31


def test_item2_64_bit_values_still_refused_with_the_type_named():
    """Sums whose values are 64-bit (float64 data, int64 columns, promotion to int64) are not
    narrow sums: the QueryError names the type and the way out."""
    for x, f in ((np.ones(4), None), (np.ones(4, np.int64), None),
                 (np.ones(4, np.int32), lambda v: v * np.int64(3))):
        q = qc.query(x) if f is None else qc.query(x).select(f)
        with pytest.raises(qc.QueryError, match=r"(float64|int64).*float32 / int32"):
            q.source("webgpu", terminal="sum")


# ---- item 2: storage bindings in windows ------------------------------------------------------
@pytest.fixture
def small_bindings(monkeypatch):
    """A 64 KiB binding limit (backends/webgpu_windows.TEST_BINDING_LIMIT): every shape runs
    over many windows with inputs of a few hundred KiB."""
    from querycompute.backends.webgpu import webgpu_windows
    monkeypatch.setattr(webgpu_windows, "TEST_BINDING_LIMIT", 1 << 16)


@needs_adapter
def test_item2_every_shape_over_binding_windows(small_bindings):
    rng = np.random.default_rng(6)
    x = rng.uniform(-100, 100, 100_003).astype(np.float32)
    x[77_777] = np.nan
    i = rng.integers(-2 ** 31, 2 ** 31, 60_001).astype(np.int32)
    for xs in (x, x[::3], x[::11]):              # contiguous, gathered span, copied
        got, want = _both((xs,), lambda q: (
            q.select(lambda v: v * 2).to_array(),
            q.where(lambda v: v > 50).to_array(),                        # order kept across windows
            q.where(lambda v: v > 50).skip(10).take(1000).to_array(),   # a window of survivors
            q.where(lambda v: v > 99.9).first(default=None),
            q.count(lambda v: v > 0), q.max(), q.min(),
            q.any(lambda v: v > 99.9), q.all(lambda v: v > -100)))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        s_got, s_want = _both((xs[~np.isnan(xs)],), lambda q: q.sum())
        assert s_got.dtype == s_want.dtype and abs(float(s_got) - float(s_want)) <= 1e-5 * float(np.nansum(np.abs(xs)))
    got = qc.query(i).on("webgpu").agg(s=qc.sum, m=qc.mean, n=qc.count, lo=qc.min)
    rows = [k for k in qc.last_trace().kernels if k.dialect == "webgpu"]
    want = qc.query(i).on("numpy").agg(s=qc.sum, m=qc.mean, n=qc.count, lo=qc.min)
    assert got["s"] == want["s"] and got["n"] == want["n"] and got["lo"] == want["lo"]
    assert got["m"] == pytest.approx(want["m"], rel=1e-12)
    windows = -(-len(i) * 4 // ((1 << 16) - 4))
    assert len(rows) == 2 * windows           # partials + finalize per window, all in the trace
    with pytest.raises(qc.QueryError, match="fold.*binding"):
        qc.query(i).on("webgpu").aggregate(lambda acc, v: v if v != 0 else acc, np.int32(-1))


# ---- item 5 (elapsed_ms): kernel timings ------------------------------------------------------
@needs_adapter
def test_item5_trace_rows_carry_device_timings():
    """Every webgpu kernel row of qc.last_trace() has a real, positive run time (timestamp
    queries where the adapter has them, else wall-clock around submit and wait)."""
    x = np.random.default_rng(8).uniform(0, 1, 200_000).astype(np.float32)
    q = qc.query(x).on("webgpu")
    for run in (lambda: q.select(lambda v: v * 2).to_array(), lambda: q.where(lambda v: v > 0.5).sum()):
        run()
        rows = [k for k in qc.last_trace().kernels if k.dialect == "webgpu"]
        assert rows and all(np.isfinite(k.run_ms) and k.run_ms > 0 for k in rows), rows


# ---- item 1: the pipeline operators' kernels in WGSL ------------------------------------------
@needs_adapter
def test_item1_order_by_take_distinct_scan_group_by_run_wgsl_kernels():
    """order_by (multi-pass radix sort), take after order_by (top-k), distinct, scan and
    group_by run the sort / scan / group kernels printed as WGSL: every trace row is a webgpu
    kernel, the results are NumPy's (float sums within reassociation)."""
    rng = np.random.default_rng(9)
    n = 5000                                       # > one 1024-row tile: the multi-pass paths
    x = rng.uniform(-100, 100, n).astype(np.float32)
    x[::97] = np.nan
    k = rng.integers(-3, 4, n).astype(np.int32)
    b = rng.integers(0, 2, n).astype(bool)
    cases = {
        "order_by": lambda on: qc.query(x).on(on).order_by(lambda v: v).to_array(),
        "top_k": lambda on: qc.query(x).on(on).order_by_descending(lambda v: v).take(25).to_array(),
        "distinct": lambda on: qc.query(k).on(on).distinct().to_array(),
        "distinct_bool": lambda on: qc.query(b).on(on).distinct().to_array(),
        "scan_max": lambda on: qc.query(k).on(on).scan(lambda a, v: max(a, v), np.int32(-5)).to_array(),
        "scan_sum": lambda on: qc.query(x).on(on).scan(lambda a, v: a + v, np.float32(0)).to_array(),
        "group_by": lambda on: qc.query(k=k, x=x).on(on).group_by(lambda r: r.k).agg(
            n=qc.count, hi=qc.max(lambda r: r.x), s=qc.sum(lambda r: r.x)),
    }
    for name, run in cases.items():
        got = run("webgpu")
        dialects = {r.dialect for r in qc.last_trace().kernels}
        assert dialects == {"webgpu"}, (name, dialects)
        want = run("numpy")
        if name == "scan_sum":
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-2)
        elif name == "group_by":
            for key in ("key", "n", "hi"):
                np.testing.assert_array_equal(got[key], want[key])
            np.testing.assert_allclose(got["s"], want["s"], rtol=1e-4, atol=1e-2)
        else:
            np.testing.assert_array_equal(got, want)


# ---- item 2 (what the shared suites found): math within a few ulp of NumPy --------------------
def _ulps(got, want):
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(all="ignore"):
        spacing = np.abs(np.spacing(np.maximum(np.abs(got), np.abs(want)).astype(np.float32)))
        dist = np.where(same, 0.0, np.abs(got.astype(np.float64) - want.astype(np.float64)) / spacing)
    return np.where(np.isnan(dist), np.inf, dist)


@needs_adapter
def test_item2_math_functions_where_drivers_are_far_off():
    """lavapipe's WGSL math is far from NumPy's where WGSL's accuracy rules allow it: sin of
    3e38 = -1, tanh(1e-38) = 3e-8, log(0.9992) 964 ulp off, exp(66) 50 ulp, 51 ** 3 =
    132651.08, (1 + x) - 1 folded to x in log1p, abs(sqrt(-0.0)) = -0.0. The helpers keep
    every one within 5 ulp (special values exact)."""
    rng = np.random.default_rng(10)
    x = np.concatenate([rng.uniform(-10, 10, 2000), np.exp(rng.uniform(-30, 88, 2000)) * rng.choice([-1, 1], 2000),
                        [3.4028235e38, -1e38, 1e-38, 1.79e-7, 0.9991849, 51.0, 66.5, 0.0, -0.0, np.inf,
                         -np.inf, np.nan]]).astype(np.float32)
    f = lambda v: (np.sin(v), np.cos(v), np.tan(v), np.tanh(v), np.exp(v / 1000), np.log(abs(v)),   # noqa: E731
                   np.log1p(abs(v)), v ** 3, v ** -2, v ** 1.5, v ** 0.5)
    with np.errstate(all="ignore"):
        got = qc.query(x).select(f).on("webgpu").to_array()
        want = qc.query(x).select(f).on("numpy").to_array()
    for k, (g, w) in enumerate(zip(got, want)):
        far = _ulps(g, w) > 5
        assert not far.any(), (k, x[far][:5], g[far][:5], w[far][:5])
    assert np.signbit(got[-1][x == 0]).sum() == 0          # (-0.0) ** 0.5 is +0.0


@needs_adapter
def test_item1_column_operations_on_64_bit_values_say_numpy():
    """A column operation whose values would be 64-bit (WGSL has none; the passes refuse to
    make such columns, so only a direct call gets here) runs on the numpy reference and its
    trace row names numpy: never a truncated result, never silent."""
    from querycompute._codegen.ir import expr as E
    from querycompute._codegen.ir.stage_specs import ScanSpec, SortSpec
    from querycompute.backends.webgpu.webgpu_stages import webgpu_stages
    stages = webgpu_stages()
    v = np.array([2 ** 40, 1, -2 ** 41, 7], np.int64)
    add = E.Binary("add", E.Var("acc", "int64"), E.Var("item", "int64"), "int64")
    rows: list = []
    out = stages.scan(ScanSpec("int64", add, E.Const(0, "int64")), v, (), rows)
    np.testing.assert_array_equal(out, np.cumsum(v))
    perm = stages.sort(SortSpec(("int64",), (False,)), [v], None, rows)
    np.testing.assert_array_equal(perm, np.argsort(v, kind="stable"))
    assert [r.dialect for r in rows] == ["numpy", "numpy"]
    rows.clear()
    w = np.array([3, 1, 2], np.int32)                # 32-bit keys: the WGSL sort kernels
    np.testing.assert_array_equal(stages.sort(SortSpec(("int32",), (False,)), [w], None, rows), [1, 2, 0])
    assert {r.dialect for r in rows} == {"webgpu"}


@needs_adapter
def test_item2_zero_constants_and_self_subtraction_are_not_folded():
    """Item 2 (bit-identical elementwise results): drivers that treat WGSL float arithmetic as
    inexact fold x * 0 to 0, x + 0 to x and x - x to 0 (lavapipe does); NumPy gives NaN for
    NaN and inf, a signed zero, and +0 for -0 + 0."""
    x = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, -5.0, 3.0], dtype=np.float32)
    chains = {"v*0": lambda v: v * 0, "0*v": lambda v: 0 * v, "v*-0": lambda v: v * -0.0,
              "v+0": lambda v: v + 0, "0+v": lambda v: 0 + v, "v--0": lambda v: v - (-0.0),
              "v-v": lambda v: v - v}
    for name, f in chains.items():
        got = qc.query(x).on("webgpu").select(f).to_array()
        want = qc.query(x).on("numpy").select(f).to_array()
        np.testing.assert_array_equal(got, want, err_msg=name)
        ok = ~np.isnan(want)
        assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok])), name
