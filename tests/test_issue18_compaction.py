"""Issue 18 item 2, executed: order-preserving compaction as reduce-then-scan with a
multi-block scan of the tile counts on CUDA (on request) and Metal (CPU harness) and OpenCL
(pocl), and as a single pass with decoupled look-back on CUDA (its default since issue 30),
against NumPy for n across many tiles."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen import gpu
from querycompute.backends.gpu.gpu_launch import LaunchLoop
from harness import plans, runner
from harness.passes import assert_same, data, expected, passes

D = "float32"
# the "where" pass writes x - 1 and the int64 index: 2 elements a thread, reduce-then-scan
# tiles of 512 (17,001 elements: 34 tiles), CUDA's one pass 4 runs of 2, tiles of 2048 (9)
SIZES = (1, 513, 17_001)


def _harness(dialect):
    ok, why = runner.available()
    if not ok:
        pytest.skip(why)
    ks = gpu.render(passes(D)["where"], dialect)
    return ks, plans.module_for([ks])


def _check(ks, module, schedules=("free",)):
    for n in SIZES:
        x = data(D, 2 * n, seed=n)
        for view in (x[:n], x[::2]):                  # contiguous and strided variants
            for schedule in schedules:
                raw, launches, _ = LaunchLoop(ks, plans.HarnessRuntime(ks, module, schedule)).run([view], (), n)
                assert_same("where", D, raw, expected("where", D, view))
    return launches


def test_item2_cuda_single_pass_lookback_matches_numpy():
    """The look-back lowering, CUDA's default (compact_gpu.ALGORITHM, issue 30 item 2)."""
    ks, module = _harness("cuda")
    roles = [(k.role, k.variant) for k in ks.kernels]
    assert roles == [("init", "any"), ("scatter", "contiguous"), ("scatter", "strided")]
    assert "volatile" in ks.source and "atomicAdd" in ks.source
    launches = _check(ks, module, ("free", "alternate"))
    assert [launch.kernel.role for launch in launches] == ["init", "scatter"]    # one pass over the input


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item2_reduce_then_scan_matches_numpy(dialect, monkeypatch):
    from querycompute._codegen.ops.compact import gpu as compact_gpu
    monkeypatch.setitem(compact_gpu.ALGORITHM, "cuda", "reduce_then_scan")
    ks, module = _harness(dialect)
    assert [k.role for k in ks.kernels if k.variant != "strided"] == [
        "count", "partials", "scan", "downsweep", "scatter"]
    _check(ks, module)


def test_item2_pocl_multi_block_count_scan():
    """n large enough that the scan of the tile counts needs several blocks on pocl."""
    try:
        import pyopencl as cl
        if not any(p.get_devices() for p in cl.get_platforms()):
            raise RuntimeError("no OpenCL device")
    except Exception as exc:
        pytest.skip(f"OpenCL unavailable ({exc})")
    ks = gpu.render(passes(D)["where"], "opencl")
    partials = next(k for k in ks.kernels if k.role == "partials")
    count_tile = int(partials.grid.split("/")[1])     # tile counts one scan block takes
    n = (count_tile + 5) * ks.block * 4               # float32 only: 4 elements a thread
    x = (np.arange(n) % 1009).astype(np.float32)
    q = qc.query(x).where(lambda v: v % 3 < 1).select(lambda v: v * 2 + 1)
    assert "_compact_scan_partials: grid=(2,)" in q.explain("opencl", terminal="to_array")
    got = q.on("opencl").to_array()
    np.testing.assert_array_equal(got, q.on("numpy").to_array())
    np.testing.assert_array_equal(got, x[x % 3 < 1] * 2 + 1)


def test_item5_unused_column_is_not_copied_and_does_not_pick_the_variant():
    """A pass over (x float32, d float64) that loads only x: d (strided here) is neither viewed
    nor copied, and the contiguous kernels run because x, the one used input, is contiguous."""
    from querycompute._codegen.ir import expr as E
    from querycompute._codegen.ir.program import ElementProgram, Filter, InputSpec, Pass, ToArray
    ok, why = runner.available()
    if not ok:
        pytest.skip(why)
    x = E.Load(0, D)
    prog = ElementProgram((InputSpec("x", D), InputSpec("d", "float64")), (),
                          (Filter(E.Compare("gt", x, E.Const(10.0, D))),), (E.Binary("mul", x, E.Const(2.0, D), D),))
    ks = gpu.render(Pass(prog, ToArray(), "h_unused"), "cuda")
    loop = LaunchLoop(ks, plans.HarnessRuntime(ks, plans.module_for([ks]), "free"))
    assert loop.used == {0}
    n = 3001
    xs, d = data(D, n, seed=5), np.arange(2 * n, dtype=np.float64)[::2]
    store = np.zeros(n + 4, D)
    aligned = store[(-store.ctypes.data % 16) // 4:][:n]         # 16-byte aligned: wide loads allowed
    aligned[:] = xs
    raw, launches, _ = loop.run([aligned, d], (), n)
    with np.errstate(over="ignore"):                 # the extremes in data() double to inf
        np.testing.assert_array_equal(raw[0], aligned[aligned > 10] * np.float32(2))
    assert {launch.kernel.variant for launch in launches} - {"any"} == {"contiguous"}
