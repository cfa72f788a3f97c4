"""Issue 15: the webgpu backend (WGSL through wgpu-py), checked against the numpy backend.

Runs where a WebGPU adapter exists (CI: Mesa's lavapipe, with WGPU_BACKEND_TYPE=Vulkan); the
tests that need no device (WGSL source, the 64-bit checks) run everywhere.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

os.environ.setdefault("WGPU_BACKEND_TYPE", "Vulkan")     # before the device opens

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import querycompute as qc
from chains import arrays, chain
from test_property_chains import SETTINGS, TERMINALS, assert_same, build, run_terminal

WEBGPU = qc.backends()["webgpu"]
needs_adapter = pytest.mark.skipif(not WEBGPU["available"], reason=f"no WebGPU adapter: {WEBGPU['reason']}")
DTYPES = ["float32", "int32", "uint8", "bool", "float16"]


def _needs_64_bits(values: np.ndarray, terminal: str) -> bool:
    """WGSL has no 64-bit types: a chain whose values became 64-bit (NumPy's promotion, e.g.
    bool + 1 -> int64) can't run. (NumPy's int64 sums and float64 means of narrower integers
    and bools do: two-word sums.)"""
    return values.dtype.itemsize == 8


# ---- item 1: the dialect -------------------------------------------------------------------
def test_item1_source_is_wgsl_without_a_device():
    x = np.arange(10, dtype=np.float32)
    src = qc.query(x).where(lambda v: v > 3).source("webgpu", terminal="to_array")
    assert "@compute @workgroup_size(256)" in src and "var<workgroup>" in src
    assert "@group(0) @binding(0) var<storage, read> in_x: array<f32>;" in src
    out = subprocess.run([sys.executable, "-m", "querycompute", "source",
                          "select(lambda v: v * 2).where(lambda v: v > 1000).sum()",
                          "--dtype", "float32", "--backend", "webgpu"],
                         capture_output=True, text=True, check=True).stdout
    assert "fn qc_sum_reduce_finalize(" in out and "workgroupBarrier();" in out


@needs_adapter
@given(data=st.data(), dtype=st.sampled_from(DTYPES), terminal=st.sampled_from(TERMINALS))
@settings(max_examples=60, **SETTINGS)
def test_item1_random_chains_match_numpy(data, dtype, terminal):
    steps = data.draw(chain(dtype))
    assume(not any("64" in text for _, text in steps))      # float64 / int64 casts: item 2
    x = data.draw(arrays(dtype, max_size=300))
    q = build(x, steps)
    values = q.on("numpy").to_array()
    got = run_terminal(q.on("webgpu"), terminal)
    if _needs_64_bits(values, terminal):
        assert isinstance(got, type) and issubclass(got, qc.QueryError), got
        return
    if got is qc.UnsupportedTypeError:
        # a 64-bit value inside the chain (np.sqrt(2.0) + v is float64 under NumPy 2, even
        # when a later select casts it back): refused, and the message says why
        with pytest.raises(qc.UnsupportedTypeError, match="a value the lambdas compute is (float|u?int)64"):
            q.on("webgpu").to_array()
        return
    assert_same(got, run_terminal(q.on("numpy"), terminal), values)


@needs_adapter
@pytest.mark.parametrize("dtype", DTYPES)
def test_item1_kernel_shapes_strided_and_early_exit(dtype):
    rng = np.random.default_rng(5)
    n = 3 * 1024 + 17                           # > 3 tiles of every dtype's map kernels
    base = (rng.uniform(-300, 300, 3 * n) if dtype != "bool" else rng.integers(0, 2, 3 * n)).astype(dtype)
    double = (lambda v: not v) if dtype == "bool" else (lambda v: v * 2)
    keep = (lambda v: v) if dtype == "bool" else (lambda v: v > 0)      # (bool > 0 would be int64)
    for x in (base[:n], base[::3]):             # contiguous and strided inputs
        for on in ("webgpu", "numpy"):
            q = qc.query(x).on(on)
            res = dict(arr=q.select(double).to_array(),
                       kept=q.where(keep).to_array(),
                       first=q.where(keep).first(default=None),
                       any=q.any(keep), all=q.all(keep),
                       count=q.count(keep), mx=q.max(), mn=q.min())
            if on == "webgpu":
                got = res
            else:
                want = res
        for k in want:
            assert_same(got[k], want[k], x)


@needs_adapter
def test_item1_tables_zips_agg_and_fold():
    rng = np.random.default_rng(1)
    n = 5000
    p = rng.uniform(0, 100, n).astype(np.float32)
    qty = rng.integers(-5, 20, n).astype(np.int32)
    flag = rng.integers(0, 2, n).astype(bool)
    for on in ("webgpu", "numpy"):
        t = qc.query(price=p, qty=qty).on(on)
        z = qc.query(p, qty, flag).on(on)
        res = dict(
            table=t.where(lambda r: r.qty > 2).select(lambda r: r.price * np.float32(r.qty)).to_array(),
            agg=t.agg(peak=qc.max(lambda r: r.price), n=qc.count, low=qc.min(lambda r: r.qty),
                      total=qc.sum(lambda r: r.price)),
            zip=z.where(lambda a, b, c: c).select(lambda a, b, c: (a, b)).to_array(),
            # "last non-zero": associative, not commutative (order kept across blocks)
            fold=qc.query(qty).on(on).aggregate(lambda acc, v: v if v != 0 else acc, np.int32(-1)),
            mean=t.mean(lambda r: r.price))
        if on == "webgpu":
            got = res
        else:
            want = res
    for k in want:
        if isinstance(want[k], tuple):
            for g, w in zip(got[k], want[k]):
                np.testing.assert_array_equal(g, w)
        else:
            assert_same(got[k], want[k], p)


# ---- item 2: WGSL's limits -----------------------------------------------------------------
def test_item2_64_bit_values_raise_a_clear_error():
    with pytest.raises(qc.QueryError, match="float64.*float32"):
        qc.query(np.ones(4)).source("webgpu", terminal="sum")
    with pytest.raises(qc.QueryError, match="int64"):
        qc.query(np.ones(4, np.int64)).source("webgpu", terminal="sum")
    with pytest.raises(qc.QueryError, match="int64"):
        qc.query(np.ones(4, np.float32)).select(lambda v: np.int64(v)).source("webgpu", terminal="to_array")
    # counts, first's index and compaction offsets are 64-bit in the IR and fine in WGSL
    assert "fn qc_count_reduce_partials(" in qc.query(np.ones(4, np.int32)).source("webgpu", terminal="count")


@needs_adapter
def test_item2_64_bit_errors_at_run_time():
    with pytest.raises(qc.QueryError, match="float64"):
        qc.query(np.ones(4)).on("webgpu").sum()
    assert qc.query(np.ones(4, np.int32)).on("webgpu").count() == 4


@needs_adapter
def test_item2_two_dimensional_dispatch(tmp_path):
    """With at most 7 workgroups per dimension, every kernel of a 50,000-element map,
    compaction and reduction is dispatched in 2-D (and its padding blocks skip)."""
    script = tmp_path / "dispatch.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, querycompute as qc
        x = np.random.default_rng(2).uniform(-1, 1, 50_000).astype(np.float32)
        for on in ("webgpu", "numpy"):
            q = qc.query(x).on(on)
            r = (q.select(lambda v: v * 3).to_array(), q.where(lambda v: v > 0.5).to_array(),
                 q.count(lambda v: v > 0), q.max())
            if on == "webgpu":
                got = r
        for g, w in zip(got, r):
            assert np.array_equal(g, w), (g, w)
        print("ok", qc.last_trace() is not None)
    """))
    env = dict(os.environ, QUERYCOMPUTE_WEBGPU_MAX_GROUPS="7", QUERYCOMPUTE_TIERED="0")
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]


@needs_adapter
def test_item2_inputs_above_the_binding_size_run_in_windows():
    """Inputs above the adapter's real max_storage_buffer_binding_size (128 MiB on lavapipe):
    a uint8 sum and a float32 map run over binding windows, results as NumPy's
    (tests/test_issue15_gaps.py covers every shape with a lowered limit)."""
    from querycompute.backends.webgpu.webgpu_device import open_device
    limit = open_device().max_binding
    rng = np.random.default_rng(4)
    u = np.tile(rng.integers(0, 256, 1 << 20, dtype=np.uint8), (limit >> 20) + 2)
    q = qc.query(u).on("webgpu")
    assert q.sum() == u.sum(dtype=np.uint64)
    del u
    f = np.linspace(-1, 1, limit // 4 + 12_345, dtype=np.float32)
    np.testing.assert_array_equal(qc.query(f).on("webgpu").select(lambda v: v * 3 + 1).to_array(),
                                  f * np.float32(3) + np.float32(1))


# ---- item 3: Mesa's 65,535 iterations per invocation ----------------------------------------
@needs_adapter
def test_item3_more_elements_than_a_naive_grid_stride_loop_could_reach():
    """A single workgroup striding over n elements would loop n / 256 > 65,535 times per
    invocation, which Mesa 22.3 cuts short silently; the grids come from n, so every
    invocation loops a few times only and the results are complete."""
    n = 256 * 65_536 + 4_099
    x = (np.arange(n, dtype=np.uint32) * 2654435761 % 251).astype(np.uint8)
    x[-1] = 255                                  # the maximum sits at the very end
    q = qc.query(x).on("webgpu")
    assert q.max() == 255
    assert q.count(lambda v: v > 200) == int(np.count_nonzero(x > 200))
    assert q.where(lambda v: v == 255).first() == 255
    kept = q.where(lambda v: v > 249).to_array()
    np.testing.assert_array_equal(kept, x[x > 249])


# ---- item 4: runtime, cache, compile errors -------------------------------------------------
@needs_adapter
def test_item4_disk_cache_holds_the_wgsl_and_errors_are_line_numbered():
    x = np.arange(100, dtype=np.float32)
    assert qc.query(x).select(lambda v: v + 0.25).on("webgpu").to_array()[3] == np.float32(3.25)
    entries = [e for e in qc.cache.entries() if e.backend == "webgpu"]
    assert entries, "no webgpu entry in the disk cache"
    from querycompute.backends.webgpu.webgpu_device import build_module, open_device
    with pytest.raises(qc.CompileError) as err:
        build_module(open_device(), "fn broken() -> i32 {\n    return 1.5f;\n}\n")
    assert err.value.dialect == "webgpu" and "   2 |     return 1.5f;" in str(err.value)


@needs_adapter
def test_item1_auto_never_picks_a_cpu_adapter():
    from querycompute.backends import registry
    b = registry.get("webgpu")
    if b._device().is_cpu:
        assert not b.is_gpu
        assert registry._choose(True) != "webgpu"


@needs_adapter
def test_item2_elementwise_results_are_bit_identical():
    """No contraction of a * b + c into an fma, IEEE division and sqrt, NaN-propagating
    min/max, NumPy's float -> int conversions of NaN / inf / out-of-range values, Python //
    and % (by zero, MIN // -1), NumPy shifts."""
    rng = np.random.default_rng(3)
    n = 4096
    a, b, c = (rng.uniform(-1e4, 1e4, n).astype(np.float32) for _ in range(3))
    a[:6] = [np.nan, np.inf, -np.inf, 3e9, -3e9, -0.0]
    b[:3] = [0.0, -0.0, np.nan]
    i = rng.integers(-2 ** 31, 2 ** 31, n).astype(np.int32)
    j = rng.integers(-40, 40, n).astype(np.int32)
    i[:3], j[:3] = [-2 ** 31, 7, -7], [-1, 0, 2]
    cases = [
        ((a, b, c), lambda x, y, z: x * y + z),
        ((a, b, c), lambda x, y, z: x / y - np.sqrt(abs(z))),
        ((a, b, c), lambda x, y, z: max(x, y) + min(y, z)),
        ((a, b, c), lambda x, y, z: (x // y, x % y)),
        ((a, b, c), lambda x, y, z: (np.int32(x), np.uint8(y), np.uint32(z), np.int16(x))),
        ((i, j), lambda x, y: (x // y, x % y, x << y, x >> y, x * y, -x, abs(x))),
        ((i, j), lambda x, y: (np.float32(x), np.float16(y), np.uint8(x), np.int8(y))),
    ]
    with np.errstate(all="ignore"):
        for inputs, f in cases:
            got = qc.query(*inputs).select(f).on("webgpu").to_array()
            want = qc.query(*inputs).select(f).on("numpy").to_array()
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                assert g.dtype == w.dtype
                np.testing.assert_array_equal(g, w)          # NaN == NaN (its sign bit is not NumPy's)
                if g.dtype.kind == "f":                       # -0.0 vs 0.0
                    number = ~np.isnan(w)
                    np.testing.assert_array_equal(np.signbit(g[number]), np.signbit(w[number]))


@needs_adapter
def test_item2_nan_compares_unequal_and_is_truthy():
    """naga spells `!=` as an ordered compare (false for NaN): NumPy says NaN != x and
    bool(NaN) are true. Found by the random chains (where v != 0.0 on NaN; any(0 // 0))."""
    x = np.array([np.nan, 0.0, 1.0, -0.0], dtype=np.float32)
    for on in ("webgpu", "numpy"):
        q = qc.query(x).on(on)
        got = (q.where(lambda v: v != 0.0).count(), q.select(lambda v: v != v).to_list(),
               q.any(lambda v: v + (v // v)), q.select(lambda v: bool(v)).to_list())
        if on == "webgpu":
            web = got
    assert web == got == (2, [True, False, False, False], True, [True, False, True, False])
