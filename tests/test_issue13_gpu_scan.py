"""Issue 13 item 2 (and 4): the GPU scan kernels of querycompute/_codegen/ops/scan/gpu.py.

OpenCL (reduce-then-scan) runs on pocl; CUDA C (single-pass decoupled look-back) and MSL
(reduce-then-scan) run through the CPU harness, which launches blocks one after another in
ticket order, so the look-back finds every earlier tile published (it is exercised, never
spins); the look-back group is shrunk to 2 and 3 tiles so small inputs cross several groups,
and one input crosses the real 32-tile group. Every result is compared with the numpy
reference `ops/scan/reference.scan_reference`; data keep float sums exact (small integers), so
results must be equal whatever the grouping, except in the one test of arbitrary floats
(close to the reference, and the same bits run to run). Every dtype compiles with NVRTC
(sm_80, sm_90) and passes the Metal compile check.
"""
from __future__ import annotations


import numpy as np
import pytest
from compile_checks import ARCHS, metal_compiles, ptx_of
from hypothesis import given, settings
from hypothesis import strategies as st

from querycompute._codegen import dtypes as D
from querycompute._codegen.ir import expr as E
from querycompute._codegen.errors import UnsupportedType
from querycompute._codegen.ops.scan import gpu as scan
from querycompute._codegen.ir.program import ParamSpec
from querycompute._codegen.ir.stage_specs import ScanSpec
from querycompute.backends.gpu.gpu_launch import LaunchLoop
from querycompute.backends.gpu.gpu_scan import run_scan
from querycompute._codegen.ops.scan.reference import scan_reference

ALL = ("bool",) + D.INTEGERS + D.FLOATS


def _v(name, dt):
    return E.Var(name, dt)


def spec_of(kind: str, dt: str, seed=0, name: str = "") -> ScanSpec:
    """sum / min / max / or (bool) / last_above (non-commutative, reads param k) /
    first_nonzero (non-commutative)."""
    a, x = _v("acc", dt), _v("item", dt)
    params = ()
    if kind in ("sum", "min", "max"):
        comb = E.Binary({"sum": "add"}.get(kind, kind), a, x, dt)
    elif kind == "or":
        comb = E.Binary("or", a, x, "bool")
    elif kind == "last_above":       # the latest item above k, else what came before
        params = (ParamSpec("k", dt),)
        comb = E.Where(E.Compare("gt", x, E.Param("k", dt), "bool"), x, a, dt)
    elif kind == "first_nonzero":    # the earliest non-zero value
        comb = E.Where(E.Compare("ne", a, E.Const(0, dt), "bool"), a, x, dt)
    else:
        raise ValueError(kind)
    return ScanSpec(dt, comb, E.Const(seed, dt), params, name or f"s_{kind}_{dt}")


def data(dt: str, n: int, seed: int = 0) -> np.ndarray:
    """Small integers (float sums stay exact), some zeros; NaNs for float min/max tests."""
    rng = np.random.default_rng(abs(seed) * 100003 + n)
    if dt == "bool":
        return rng.random(n) < 0.1
    lo = 0 if dt.startswith("uint") else -3
    return rng.integers(lo, 4, n).astype(dt)


def tile(dt: str) -> int:
    ks = scan.render(spec_of("sum", dt), "opencl")
    return ks.block * ks.elems_per_thread


def sizes(dt: str) -> list[int]:
    t = tile(dt)
    return [0, 1, 7, t - 1, t, t + 1, 3 * t + 5]


def check(spec: ScanSpec, x: np.ndarray, params, out: np.ndarray) -> None:
    ref = scan_reference(spec, x, params)
    assert out.dtype == np.dtype(spec.dtype) and out.shape == ref.shape
    assert np.array_equal(out, ref, equal_nan=D.is_float(spec.dtype)), (
        f"{spec.name} n={len(x)}: first difference at {np.flatnonzero(out != ref)[:5]}")


# ---- OpenCL on pocl ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def cl_loop(ocl):
    """loop(spec) -> a LaunchLoop of the spec's OpenCL kernels (built once per spec)."""
    from querycompute.backends.opencl.opencl import OpenCLRuntime
    from querycompute.backends.opencl.opencl_device import build_program
    dev, loops = ocl._device(), {}

    def get(spec):
        if spec not in loops:
            ks = scan.render(spec, "opencl")
            loops[spec] = LaunchLoop(ks, OpenCLRuntime(dev, build_program(dev.context, dev.device, ks.source,
                                                                          ks.options)))
        return loops[spec]
    return get


@pytest.mark.parametrize("dt", ALL)
def test_item2_opencl_scan_every_dtype(cl_loop, dt):
    kinds = ("or", "first_nonzero") if dt == "bool" else ("sum", "first_nonzero")
    for kind in kinds:
        spec = spec_of(kind, dt, seed=True if dt == "bool" and kind == "or" else 0)
        for n in sizes(dt):
            x = data(dt, n)
            check(spec, x, (), run_scan(cl_loop(spec), spec, x)[0])


@pytest.mark.parametrize("dt", ["int16", "uint32", "float16", "float32", "float64"])
@pytest.mark.parametrize("kind", ["min", "max"])
def test_item2_opencl_min_max_with_nan(cl_loop, dt, kind):
    spec = spec_of(kind, dt, seed=1)
    for n in sizes(dt):
        x = data(dt, n)
        if D.is_float(dt) and n > 3:
            x[n // 3] = np.nan
        check(spec, x, (), run_scan(cl_loop(spec), spec, x)[0])


@pytest.mark.parametrize("dt", ["int32", "float32", "float16", "uint8"])
def test_item2_opencl_non_commutative_with_a_captured_param(cl_loop, dt):
    spec = spec_of("last_above", dt, seed=7)
    for n in sizes(dt):
        x = data(dt, n)
        for k in (1, 2):                 # a parameter: the same kernels, no rebuild
            params = (np.dtype(dt).type(k),)
            check(spec, x, params, run_scan(cl_loop(spec), spec, x, params)[0])


def test_item2_opencl_float_sum_is_close_and_deterministic(cl_loop):
    spec = spec_of("sum", "float32")
    x = np.random.default_rng(1).random(5 * tile("float32") + 3).astype(np.float32)
    a = run_scan(cl_loop(spec), spec, x)[0]
    b = run_scan(cl_loop(spec), spec, x.copy())[0]
    assert a.tobytes() == b.tobytes()
    np.testing.assert_allclose(a, scan_reference(spec, x, ()), rtol=1e-5)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["sum", "max", "first_nonzero", "last_above"]), st.sampled_from(["int64", "float32"]),
       st.integers(0, 4000), st.integers(-5, 5))
def test_item4_opencl_scan_property(cl_loop, kind, dt, n, seed):
    spec = spec_of(kind, dt, seed=seed)
    x = data(dt, n, seed)
    params = (np.dtype(dt).type(1),) if spec.params else ()
    check(spec, x, params, run_scan(cl_loop(spec), spec, x, params)[0])


# ---- CUDA C and MSL through the CPU harness -----------------------------------------------
HARNESS_CASES = [("sum", "int32", 5), ("sum", "int8", 0), ("sum", "float16", 0), ("or", "bool", 0),
                 ("first_nonzero", "int64", 0), ("last_above", "float32", -1), ("max", "float64", 0)]


@pytest.fixture(scope="module")
def harness():
    from harness import plans, runner
    if not runner.available()[0]:
        pytest.skip(runner.available()[1])
    return plans


@pytest.mark.parametrize("dialect,group", [("cuda", 2), ("cuda", 3), ("metal", scan.LOOKBACK)])
def test_item2_harness_scan(harness, dialect, group):
    cases = [c for c in HARNESS_CASES if not (dialect == "metal" and c[1] == "float64")]
    specs = [spec_of(kind, dt, seed) for kind, dt, seed in cases]
    sets = [scan.render(s, dialect, group) for s in specs]
    module = harness.module_for(sets)
    for spec, ks in zip(specs, sets):
        t = ks.block * ks.elems_per_thread
        for n in (0, 1, t + 1, 3 * t + 5, 7 * t):     # 7 tiles: several groups of 2 and 3
            x = data(spec.dtype, n)
            params = (np.dtype(spec.dtype).type(1),) if spec.params else ()
            loop = LaunchLoop(ks, harness.HarnessRuntime(ks, module, "alternate" if n <= t + 1 else "free"))
            check(spec, x, params, run_scan(loop, spec, x, params)[0])


def test_item2_cuda_lookback_crosses_a_full_group(harness):
    """More tiles than one look-back group of 32: the second group starts from the first
    group's published inclusive prefix."""
    spec = spec_of("sum", "int64", seed=-2, name="s_full_group")
    ks = scan.render(spec, "cuda")
    t = ks.block * ks.elems_per_thread
    x = data("int64", (scan.LOOKBACK + 2) * t + 3)
    loop = LaunchLoop(ks, harness.HarnessRuntime(ks, harness.module_for([ks]), "free"))
    check(spec, x, (), run_scan(loop, spec, x)[0])


def test_item2_launch_plan_of_each_algorithm():
    from querycompute._codegen.launch import output_sizes, plan, scratch_sizes
    spec = spec_of("sum", "float32")
    cl, cu = scan.render(spec, "opencl"), scan.render(spec, "cuda")
    # 16-byte runs of 4 float32: 8 runs a thread on CPU devices (OpenCL), 4 on GPUs
    assert (cl.elems_per_thread, cu.elems_per_thread, cl.block) == (32, 16, 256)
    n = 10 * 256 * 32 + 1                # 11 OpenCL tiles, 21 CUDA tiles
    assert [(l.name, l.grid, l.values) for l in plan(cl, n, True)] == [
        ("s_sum_float32_scan_partials", 11, {}), ("s_sum_float32_scan_blocks", 1, {"num_blocks": 11}),
        ("s_sum_float32_scan_downsweep", 11, {})]
    assert [(l.name, l.grid, l.values) for l in plan(cu, n, True)] == [
        ("s_sum_float32_scan_init", 1, {"num_blocks": 21}), ("s_sum_float32_scan_lookback", 21, {})]
    assert output_sizes(cu, n) == [n] and scratch_sizes(cu, n) == {
        "block_aggs": 21, "block_incl": 21, "block_flags": 21, "ticket": 1}
    assert plan(cl, 0, True) == [] and plan(cu, 0, True) == []
    assert scan.bytes_per_element(spec, "opencl") == [("s_sum_float32_scan_partials", 4),
                                                      ("s_sum_float32_scan_downsweep", 8)]
    assert scan.bytes_per_element(spec, "cuda") == [("s_sum_float32_scan_lookback", 8)]
    assert "look-back" in scan.describe(spec, "cuda") and "reduce-then-scan" in scan.describe(spec, "metal")


def test_item2_combine_must_read_only_acc_item_and_params():
    bad = ScanSpec("int32", E.Binary("add", _v("acc", "int32"), _v("other", "int32"), "int32"), E.Const(0, "int32"))
    with pytest.raises(ValueError, match="only acc and item"):
        scan.render(bad, "opencl")


# ---- compile checks ----------------------------------------------------------------------
def _cuda_kinds(dt):
    return ("or", "first_nonzero") if dt == "bool" else ("sum", "last_above")


@pytest.mark.parametrize("dt", ALL)
def test_item4_nvrtc_compiles_scan_for_sm80_and_sm90(dt):
    for kind in _cuda_kinds(dt):
        ks = scan.render(spec_of(kind, dt), "cuda")
        for arch in ARCHS:
            ptx = ptx_of(ks, arch, "scan.cu")
            # the publish / consume protocol survived compilation
            assert "membar.gl" in ptx and "atom.global.add.u32" in ptx and "ld.volatile.global" in ptx


@pytest.mark.parametrize("dt", [d for d in ALL if d != "float64"])
def test_item4_metal_scan_compiles_as_cpp(dt, tmp_path):
    for kind in _cuda_kinds(dt):
        metal_compiles(scan.render(spec_of(kind, dt), "metal").source, tmp_path, "scan")


def test_item4_metal_float64_scan_is_a_clear_error():
    with pytest.raises(UnsupportedType, match="Metal has no double"):
        scan.render(spec_of("sum", "float64"), "metal")
