"""Issue 13 items 2 and 4: the GPU sort, top-k, distinct and gather kernels (ops/sort/gpu.py,
ops/sort/topk_gpu.py) run by GpuStages (backends/gpu_stages.py): OpenCL on pocl, CUDA C and MSL through
the CPU harness, all against the numpy reference NumpyStages; every kernel compiles with NVRTC
(sm_80, sm_90) and passes the Metal compile check."""
from __future__ import annotations


import numpy as np
import pytest
from compile_checks import ARCHS, metal_compiles, ptx_of
from hypothesis import given, settings
from hypothesis import strategies as st

from querycompute._codegen import launch as L
from querycompute._codegen.ops.sort import gather_gpu as gather_op
from querycompute._codegen.ops.sort import gpu as sort_op
from querycompute._codegen.ops.sort import topk_gpu as topk_op
from querycompute._codegen.ops.sort.ir import TILE
from querycompute._codegen.ir.stage_specs import SortSpec
from querycompute.backends.gpu.gpu_stages import GpuStages
from querycompute.backends.stage_runtime import NumpyStages

ALL = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
       "float16", "float32", "float64"]
BIG = 3 * TILE + 17                  # several tiles (radix blocks), not a multiple of one
REF = NumpyStages()


def column(rng, dtype: str, n: int, distinct_values: int | None = None) -> np.ndarray:
    """Values over the dtype's range with repeats; floats with NaN, -0.0, 0.0 and infinities."""
    if dtype == "bool":
        return rng.random(n) < 0.5
    if dtype.startswith("float"):
        x = (rng.standard_normal(n) * 100).astype(dtype)
        specials = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, -np.nan], dtype=dtype)
        pick = rng.random(n) < 0.2
        x[pick] = rng.choice(specials, pick.sum())
        if distinct_values:
            x = np.round(x / 40)
        return x
    info = np.iinfo(dtype)
    if distinct_values:
        return rng.integers(max(info.min, -distinct_values), distinct_values, n).astype(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


def check_sort(stages, spec, keys, k=None):
    rows = []
    got = stages.sort(spec, keys, k, rows)
    want = REF.sort(spec, keys, k, [])
    assert got.dtype == np.int64 and np.array_equal(got, want), (spec, k, got[:12], want[:12])
    return rows


# ---- OpenCL on pocl -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL)
def test_item2_opencl_sort_every_key_dtype(gpu, dtype):
    rng = np.random.default_rng(ALL.index(dtype))
    spec = SortSpec((dtype,), (False,), f"qc_s_{dtype}")
    for n in (0, 1, 2, 1000, BIG):
        check_sort(gpu, spec, [column(rng, dtype, n)])
    check_sort(gpu, spec, [np.full(BIG, column(rng, dtype, 1)[0])])        # all keys equal
    rows = check_sort(gpu, spec, [column(rng, dtype, BIG, distinct_values=5)])
    assert any("_pass_" in r.name for r in rows) and all(r.dialect == "opencl" for r in rows)


MULTI = [SortSpec(("bool", "float16", "int64"), (True, False, True), "qc_m1"),
         SortSpec(("float64", "uint64"), (True, False), "qc_m2"),
         SortSpec(("int8", "float32", "uint16", "int32"), (True, True, False, True), "qc_m3")]


@pytest.mark.parametrize("spec", MULTI, ids=lambda s: s.name)
def test_item2_opencl_multikey_mixed_directions(gpu, spec):
    rng = np.random.default_rng(7)
    for n in (1, 777, BIG):
        check_sort(gpu, spec, [column(rng, d, n, distinct_values=3) for d in spec.key_dtypes])


@pytest.mark.parametrize("spec", [SortSpec(("float32", "int32"), (True, False), "qc_t1"),
                                  SortSpec(("float64",), (False,), "qc_t2")], ids=lambda s: s.name)  # TOPK_SPECS
def test_item2_opencl_topk_never_sorts_everything(gpu, spec):
    rng = np.random.default_rng(11)
    for n in (1, 600, BIG):
        keys = [column(rng, d, n, distinct_values=4) for d in spec.key_dtypes]
        for k in (0, 1, 5, TILE, n, n + 5):
            rows = check_sort(gpu, spec, keys, k)
            if n > TILE and 0 < k < n:
                names = {r.name for r in rows}
                assert any("_topk_select" in x for x in names) and not any("_pass_" in x for x in names)
    equal = [np.zeros(BIG, d) for d in spec.key_dtypes]                    # the threshold ties everything
    check_sort(gpu, spec, equal, 5)


def test_item2_opencl_first_occurrence(gpu):
    rng = np.random.default_rng(3)
    spec = SortSpec(("float32", "int8"), (False, False), "qc_d")
    for n in (0, 1, 500, BIG):
        keys = [column(rng, "float32", n, distinct_values=3), column(rng, "int8", n, distinct_values=2)]
        got = gpu.first_occurrence(spec, keys, [])
        assert got.dtype == np.bool_ and np.array_equal(got, REF.first_occurrence(spec, keys, []))
    same = [np.full(BIG, np.nan, np.float32), np.zeros(BIG, np.int8)]
    assert np.array_equal(gpu.first_occurrence(spec, same, []), REF.first_occurrence(spec, same, []))


def test_item2_opencl_gather_every_dtype(gpu):
    rng = np.random.default_rng(5)
    cols = [column(rng, d, BIG) for d in ALL]
    for m in (0, 1, 2 * BIG + 3):
        perm = rng.integers(0, BIG, m)
        got = gpu.gather(cols, perm, [])
        for g, w in zip(got, REF.gather(cols, perm, [])):
            assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


TOPK_SPECS = [SortSpec(("float32", "int32"), (True, False), "qc_t1"), SortSpec(("float64",), (False,), "qc_t2")]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, BIG + 40), seed=st.integers(0, 2 ** 16), second=st.integers(1, 4),
       k=st.none() | st.integers(0, 1100))
def test_item4_opencl_sort_property(gpu, n, seed, second, k):
    spec = TOPK_SPECS[0]           # kernels compiled by the top-k test already
    rng = np.random.default_rng(seed)
    x = rng.choice(np.array([0.0, -0.0, 1.5, -2.0, np.nan, np.inf, 7.0], np.float32), n)
    y = rng.integers(0, second, n).astype(np.int32)
    check_sort(gpu, spec, [x, y], k)


# ---- CUDA C and MSL through the CPU harness -----------------------------------------------------
HSPEC = SortSpec(("float32", "int16"), (True, False), "qc_h")


def harness_stages(dialect: str) -> GpuStages:
    """GpuStages whose runtime is the CPU harness, all kernel sets compiled in one g++ run."""
    harness = pytest.importorskip("harness.plans")
    ok, why = harness.runner.available()
    if not ok:
        pytest.skip(why)
    sets = [sort_op.render_sort(HSPEC, dialect), topk_op.render_topk(HSPEC, dialect),
            sort_op.render_sort(HSPEC, dialect, distinct=True),
            gather_op.render_gather(("uint32", "uint16"), dialect)]
    module = harness.module_for(sets)
    return GpuStages(dialect, lambda ks: (harness.HarnessRuntime(ks, module), "compiled", 0.0))


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item4_harness_sort_topk_distinct_gather(dialect):
    """Multi-pass sort (folded int32 counts) and top-k at several tiles; the one-block sort at
    1 row, 300 rows and one full tile; distinct's flags and the gather at 300 rows (the harness
    runs every thread as a CPU thread: OpenCL covers the multi-pass distinct)."""
    stages = harness_stages(dialect)
    rng = np.random.default_rng(13)
    for n in (1, 300, TILE, BIG):
        keys = [column(rng, "float32", n, distinct_values=3), column(rng, "int16", n, distinct_values=3)]
        check_sort(stages, HSPEC, keys)
        check_sort(stages, HSPEC, keys, 5)
    small = [k[:300] for k in keys]
    assert np.array_equal(stages.first_occurrence(HSPEC, small, []), REF.first_occurrence(HSPEC, small, []))
    perm = rng.integers(0, BIG, 300)
    for g, w in zip(stages.gather(keys, perm, []), REF.gather(keys, perm, [])):
        assert g.tobytes() == w.tobytes()


# ---- compile checks: NVRTC (sm_80, sm_90) and Metal ------------------------------------------------
EVERY = SortSpec(tuple(ALL), tuple(i % 2 == 1 for i in range(len(ALL))), "qc_all")


def every_set(dialect: str) -> list[L.KernelSet]:
    return [sort_op.render_sort(EVERY, dialect), sort_op.render_sort(EVERY, dialect, "int64"),
            sort_op.render_sort(EVERY, dialect, distinct=True), topk_op.render_topk(EVERY, dialect),
            gather_op.render_gather(("uint8", "uint16", "uint32", "uint64"), dialect, "int64")]


def test_item4_every_kernel_compiles_with_nvrtc():
    for ks in every_set("cuda"):
        for arch in ARCHS:
            ptx_of(ks, arch, "sort.cu")


def test_item4_every_kernel_passes_the_metal_compile_check(tmp_path):
    for i, ks in enumerate(every_set("metal")):
        metal_compiles(ks.source, tmp_path, f"k{i}")


# ---- the launch plan and the bytes moved ---------------------------------------------------------
def test_item2_plan_small_one_block_large_radix_passes():
    spec = SortSpec(("float32",), (False,), "qc_plan")
    ks = sort_op.render_sort(spec, "opencl")
    assert [l.name for l in L.plan(ks, TILE, True)] == ["qc_plan_small"]
    large = L.plan(ks, BIG, True)
    # one counting launch (the first byte), then per pass a scan and a scatter that adds the
    # next pass's counts (int32, atomics): 1 + 4 * 2 launches
    assert len(large) == 1 + 4 * 2 and large[0].grid == -(-BIG // TILE) and large[1].grid == 1
    scatters = [l for l in large if l.values.get("phase") == 1]
    assert [l.values["shift"] for l in scatters] == [0, 8, 16, 24]
    assert large[-1].values["parity"] == 0 and large[-1].values["phase"] == 1   # the last pass writes perm_a
    per_pass = sort_op.bytes_per_element(spec, "int32")
    assert len(per_pass) == 5 and max(b for _, b in per_pass) <= 16
    assert sum(b for _, b in per_pass) <= 4 * 16                # issue 13 item 5: at most 4 x 16 B
    sizes = L.scratch_sizes(ks, BIG)
    assert sizes["counts"] == sizes["counts_b"] == 256 * (-(-BIG // TILE))


def test_item2_opencl_scan_through_gpu_stages(gpu):
    """GpuStages.scan runs the scan kernels of ops/scan/gpu.py (the gpuscan helper's) the same way."""
    from querycompute._codegen.ir import expr as E
    from querycompute._codegen.ir.stage_specs import ScanSpec
    acc, item = E.Var("acc", "int64"), E.Var("item", "int64")
    spec = ScanSpec("int64", E.Binary("add", acc, item, "int64"), E.Const(5, "int64"), name="qc_cumsum")
    rng = np.random.default_rng(17)
    for n in (0, 1, BIG):
        x = rng.integers(-1000, 1000, n)
        rows = []
        got = gpu.scan(spec, x, (), rows)
        assert np.array_equal(got, REF.scan(spec, x, (), [])) and all(r.dialect == "opencl" for r in rows)
