"""Outside tests of the core API (DESIGN.md sections 3, 4, 6, 7), written as a user would:
each one reproduces a bug found by probing the documented promises, checked against NumPy /
plain Python. Small inputs, one query shape per test (compiles are the cost)."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc

BACKENDS = ["numpy", "cpu"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_element_at_out_of_range_is_an_index_error(backend):
    # DESIGN.md is silent on the error type: Python's seq[i] raises IndexError (LINQ's
    # ElementAt throws ArgumentOutOfRangeException); it stays an EmptySequenceError too.
    x = np.arange(5.0)
    q = qc.query(x).on(backend).where(lambda v: v > 0)
    assert q.element_at(3) == x[x > 0][3]
    for i in (4, 9, -1):
        with pytest.raises(IndexError) as info:
            q.element_at(i)
        assert isinstance(info.value, qc.EmptySequenceError)
        assert "no element at that position" in str(info.value)
        assert q.element_at(i, default=-7.0) == -7.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_captured_python_int_from_2_63_up_meets_uint64(backend):
    # NumPy 2: uint64_array * 0x9E3779B97F4A7C15 is fine (a weak Python int that fits uint64);
    # it used to be refused as "does not fit in 64 bits".
    x = np.array([1, 2, 2**64 - 1], dtype=np.uint64)
    h = 0x9E3779B97F4A7C15
    q = qc.query(x).on(backend).select(lambda v: v * h ^ (v >> 3))
    for value in (0x9E3779B97F4A7C15, 7, 2**64 - 1):    # big -> small -> big: no stale kernel
        h = value
        got = q.to_array()
        assert got.dtype == np.uint64
        np.testing.assert_array_equal(got, x * np.uint64(value) ^ (x >> np.uint64(3)))
    h = 2**64 - 1
    with pytest.raises(qc.QueryError, match="out of bounds for int64"):   # NumPy: OverflowError
        qc.query(np.arange(3)).on(backend).select(lambda v: v + h).to_array()


@pytest.mark.parametrize("backend", BACKENDS)
def test_captured_int_out_of_a_narrow_range_compares_exactly(backend):
    # NumPy 2: uint8_array > 1000 is all False and int16_array == 40000 all False (no
    # OverflowError for a comparison); a captured threshold used to be refused at launch.
    x = np.array([0, 1, 200, 255], dtype=np.uint8)
    t = 100
    q = qc.query(x).on(backend)
    for t in (100, 1000, -1, 255, -70000):
        assert q.count(lambda v: v > t) == np.count_nonzero(x > t)
        assert q.count(lambda v: t <= v) == np.count_nonzero(t <= x)
    y = np.array([-5, 3, 32767], dtype=np.int16)
    t = 40000
    np.testing.assert_array_equal(qc.query(y).on(backend).select(lambda v: v != t).to_array(), y != t)


def test_webgpu_source_takes_captured_python_scalars_without_64_bit_types():
    # A captured Python float / int is weak (NumPy: float32 * 2.5 -> float32, int32 > 3 ->
    # int32 compare): no 64-bit value is needed, so WGSL must not refuse the query. Source
    # generation needs no device.
    f = np.arange(8, dtype=np.float32)
    s, t = 2.5, 3
    src = qc.query(f).where(lambda v: v > s).select(lambda v: v * t).source("webgpu", terminal="sum")
    assert "f64" not in src and "i64" not in src
    x = np.arange(8, dtype=np.int32)
    qc.query(x).select(lambda v: v * t - 1).source("webgpu", terminal="to_array")
    with pytest.raises(qc.QueryError, match="float64"):      # a float64 value stays refused
        qc.query(f).select(lambda v: float(v) * s).source("webgpu")


@pytest.mark.skipif(not qc.backends()["webgpu"]["available"], reason="no WebGPU adapter")
def test_webgpu_runs_captured_python_scalars_with_their_current_values():
    f = (np.arange(-50, 50) * 1.37).astype(np.float32)
    s, t = 2.5, 3
    q = qc.query(f).on("webgpu").where(lambda v: v > s).select(lambda v: v * s + t)
    for s, t in ((2.5, 3), (-1.75, -7)):        # new values, same kernel
        np.testing.assert_array_equal(q.to_array(), f[f > s] * np.float32(s) + np.float32(t))
    x = np.arange(-50, 50, dtype=np.int32)
    assert qc.query(x).on("webgpu").count(lambda v: v > t) == np.count_nonzero(x > t)
    u = np.array([0, 7, 200, 255], dtype=np.uint8)
    for t in (7, 1000):                          # compared in int32, exactly as NumPy 2
        assert qc.query(u).on("webgpu").count(lambda v: v > t) == np.count_nonzero(u > t)
    t = 2**40                                    # out of int32's range: compared exactly (NumPy 2)
    assert qc.query(x).on("webgpu").count(lambda v: v > t) == 0


def test_metal_takes_a_captured_python_float_through_the_harness():
    # Metal has no double: `v * k` with a captured Python float k is float32 in NumPy, so the
    # MSL must not need float64 (it used to be refused: "metal kernels cannot use float64").
    from harness import runner
    if not runner.available()[0]:
        pytest.skip(runner.available()[1])
    from expr_backends import harness_run
    f = np.linspace(-3, 3, 37, dtype=np.float32)
    k = 1.1
    q = qc.query(f).where(lambda v: v > -k).select(lambda v: v * k)
    np.testing.assert_array_equal(harness_run(q, "to_array", "metal"), f[f > np.float32(-k)] * np.float32(k))


def test_cache_clear_refuses_an_unknown_backend_name():
    # qc.cache.clear(backend="opencI") used to remove nothing and say nothing.
    for call in (qc.cache.clear, qc.cache.entries):
        with pytest.raises(ValueError, match="unknown backend 'opencI'"):
            call(backend="opencI")
    assert isinstance(qc.cache.entries(backend="opencl"), list)


@pytest.mark.parametrize("backend", BACKENDS)
def test_captured_int_out_of_bounds_is_an_overflow_error_as_in_numpy(backend):
    # NumPy 2: np.int8(1) + 300 raises OverflowError; the query's error is one too (and a
    # QueryError naming the value, the type and the lambda).
    x = np.arange(5, dtype=np.int8)
    k = 300
    with pytest.raises(OverflowError) as info:
        qc.query(x).on(backend).select(lambda v: v + k).to_array()
    assert isinstance(info.value, qc.QueryError) and "out of bounds for int8" in str(info.value)


def test_cache_clear_leaves_alone_an_entry_another_process_is_compiling(tmp_path):
    # `querycompute cache clear` while another process compiled (numba importing the module
    # from its entry, writing its files beside it) failed that compile with FileNotFoundError
    # / "cannot cache". The compiling process holds the entry's compile lock: clear and
    # prune now skip such an entry and count only what they removed.
    import subprocess
    import sys
    import textwrap

    from querycompute.cache import CacheAPI, DiskCache, make_key
    store = DiskCache(tmp_path / "cache", enabled=True)
    busy, idle = (make_key(backend="opencl", compiler="pocl", device="cpu", options=(),
                           source=f"__kernel void k{i}() {{}}\n") for i in (0, 1))
    for key in (busy, idle):
        store.store(key, b"binary", source_suffix=".cl")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, filelock
        lock = filelock.FileLock({str(tmp_path / "cache" / "locks" / (busy.digest + ".lock"))!r})
        lock.acquire(); print("held", flush=True); sys.stdin.read()""")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert CacheAPI(store).clear().entries == 1
        assert store.load(busy) == b"binary" and store.load(idle) is None
        assert CacheAPI(store).prune(0).entries == 0
    finally:
        holder.communicate("")
    assert CacheAPI(store).clear().entries == 1 and store.load(busy) is None


@pytest.mark.skipif(not qc.backends()["webgpu"]["available"], reason="no WebGPU adapter")
def test_webgpu_math_special_values_and_float16_floor_division():
    # Found on lavapipe: hypot(1, NaN) was sqrt(2) (WGSL's max drops NaN), atan2(0, 0) was
    # 3pi/4 and atan2(0, NaN) 0 (WGSL leaves them undefined), and a float16 // or % was
    # stored without rounding to half precision (65504 // 1.5 gave 43648, not 43680).
    sv = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan], dtype=np.float32)
    a, b = np.repeat(sv, len(sv)), np.tile(sv, len(sv))
    got = qc.query(a, b).on("webgpu").select(lambda y, x: (np.hypot(y, x), np.arctan2(y, x))).to_array()
    with np.errstate(all="ignore"):
        want = (np.hypot(a, b), np.arctan2(a, b))
    # a zero, infinity or NaN operand: exact, zero signs included; both finite and nonzero:
    # a few ulp (lavapipe's own atan2 was some 40 ulp off, within WGSL's documented accuracy)
    special = ~(np.isfinite(a) & np.isfinite(b) & (a != 0) & (b != 0))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g[special], w[special])
        known = special & ~np.isnan(w)
        np.testing.assert_array_equal(np.signbit(g[known]), np.signbit(w[known]))
        np.testing.assert_allclose(g[~special], w[~special], rtol=1e-6)
    h = np.array([-2.5, 7.0, 65504, 1.0, -7.0], dtype=np.float16)
    d = np.array([0.001, 6.104e-05, 1.5, -65504, 2.0], dtype=np.float16)
    got = qc.query(h, d).on("webgpu").select(lambda p, q: (p // q, p % q)).to_array()
    with np.errstate(all="ignore"):
        for g, w in zip(got, (h // d, h % d)):
            assert g.dtype == np.float16
            np.testing.assert_array_equal(g, w)


@pytest.mark.skipif(not qc.backends()["webgpu"]["available"], reason="no WebGPU adapter")
def test_webgpu_hyperbolic_and_inverse_functions_keep_numpy_special_values():
    # Found on lavapipe: arctan(NaN) was 0 and arctan(-0.0) +0.0, sinh(1e-30) was 3e-8,
    # arcsinh / arccosh of 1e30 were inf, arctanh(1e-30) was 0, arcsin(0.5) 4e-4 off.
    x = np.array([0.0, -0.0, 1e-30, -1e-30, 0.5, -0.75, 1.0, -1.0, 2.0, 30.0, 1e30, -1e30,
                  np.inf, -np.inf, np.nan], dtype=np.float32)
    fns = (np.arctan, np.sinh, np.arcsinh, np.arccosh, np.arctanh, np.arcsin, np.arccos)
    got = qc.query(x).on("webgpu").select(
        lambda v: (np.arctan(v), np.sinh(v), np.arcsinh(v), np.arccosh(v), np.arctanh(v),
                   np.arcsin(v), np.arccos(v))).to_array()
    for f, g in zip(fns, got):
        with np.errstate(all="ignore"):
            w = f(x)
        special = ~np.isfinite(w) | (w == 0)
        np.testing.assert_array_equal(g[special], w[special], err_msg=f.__name__)
        np.testing.assert_array_equal(np.signbit(g[special & ~np.isnan(w)]),
                                      np.signbit(w[special & ~np.isnan(w)]), err_msg=f.__name__)
        np.testing.assert_allclose(g[~special], w[~special], rtol=1e-6, err_msg=f.__name__)


def _clamped_running_max():
    cap = np.float32(10)
    return lambda acc, v: min(max(acc, v), cap)     # associative: min(max(a, b, c), cap)


@pytest.mark.parametrize("backend", BACKENDS + (["webgpu"] if qc.backends()["webgpu"]["available"] else []))
def test_aggregate_whose_func_reads_a_captured_value(backend):
    # aggregate(func) with a captured value in func failed to compile on cpu (numba: the
    # fold function printed the value as nothing) and on the GPU dialects (the finalize
    # kernel, which combines the partials with func, had no parameter for it).
    x = np.array([3, 9, 1, 12, 5, 7], dtype=np.float32)
    got = qc.query(x).on(backend).aggregate(_clamped_running_max(), np.float32(0))
    assert got == min(max(x.max(), 0), 10) and got.dtype == np.float32


def test_aggregate_with_a_captured_value_declares_it_in_every_gpu_kernel():
    import re
    x = np.arange(5, dtype=np.float32)
    for dialect in ("opencl", "cuda", "metal"):
        src = qc.query(x).source(dialect, terminal=qc.aggregate(_clamped_running_max(), np.float32(0)))
        kernels = re.split(r"__kernel |__global__ void |^kernel void ", src, flags=re.M)[1:]
        # partials, partials_strided (whose last block finalizes where the dialect has a
        # device fence: cuda, opencl), finalize (metal)
        assert len(kernels) == (3 if dialect == "metal" else 2), dialect
        for k in kernels:                          # a kernel that reads the value declares it
            head, body = k.split("{", 1)
            assert "p_p0" not in body or "p_p0" in head, (dialect, head)
