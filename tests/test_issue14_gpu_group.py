"""Issue 14 items 2 and 6: the GPU group_by kernels (querycompute/_codegen/ops/group/gpu.py) run
by GpuStages.group_by: OpenCL on pocl, CUDA C and MSL through the CPU harness, every result
against the numpy oracle `ops/group/reference.group_reference`; every kernel compiles with NVRTC
(sm_80, sm_90) and passes the Metal compile check.

Comparisons: group keys, counts, first, min/max, any/all, integer sums and folds exactly
(keys bit for bit: the key of a group's first row, so -0.0 / 0.0 and NaN payloads too).
Float sums: the kernels and the reference add the same values in source order with
different groupings, so they agree within rounding: |got - ref| <= count * eps * sum(|x|)
per group (eps of the accumulator dtype; the bound of any summation order). The kernels'
sums are the same bits on every run.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from compile_checks import ARCHS, metal_compiles, ptx_of

from querycompute._codegen.ir import expr as E
from querycompute._codegen import launch as L
from querycompute._codegen.ops.group import gpu as group_op
from querycompute._codegen.ops.sort.ir import TILE
from querycompute._codegen.ir.program import ParamSpec
from querycompute._codegen.ir.stage_specs import GroupAgg, GroupSpec
from querycompute.backends.gpu.gpu_stages import GpuStages
from querycompute._codegen.ops.group.reference import group_reference

BIG = 3 * TILE + 17                  # several tiles, not a multiple of one
KEY_DTYPES = ["bool", "int8", "uint16", "int32", "int64", "uint64", "float16", "float32", "float64"]


def fold_aggs(dt: str = "int64") -> tuple[tuple[GroupAgg, ...], tuple[ParamSpec, ...]]:
    """acc + item + k (associative; reads the captured k) and the first non-zero value
    (associative, not commutative: order matters)."""
    a, x = E.Var("acc", dt), E.Var("item", dt)
    plus_k = E.Binary("add", E.Binary("add", a, x, dt), E.Param("k", dt), dt)
    first_nz = E.Where(E.Compare("ne", a, E.Const(0, dt), "bool"), a, x, dt)
    return ((GroupAgg("fold", dt, plus_k, E.Const(100, dt)), GroupAgg("fold", dt, first_nz, E.Const(0, dt))),
            (ParamSpec("k", dt),))


FOLDS, FOLD_PARAMS = fold_aggs()
# every aggregate op; value columns: float64, -, float32, float32, int16, bool, bool, int64 x 3
EVERY_AGGS = (GroupAgg("sum", "float64"), GroupAgg("count", "int64"), GroupAgg("min", "float32"),
              GroupAgg("max", "float32"), GroupAgg("first", "int16"), GroupAgg("any", "bool"),
              GroupAgg("all", "bool"), GroupAgg("sum", "int64"), *FOLDS)
BASIC_AGGS = (GroupAgg("sum", "float64"), GroupAgg("count", "int64"), GroupAgg("min", "float32"),
              GroupAgg("first", "float32"))


def keys_of(rng, dtype: str, n: int, distinct: int = 5) -> np.ndarray:
    """Few distinct values (groups with many rows); floats with NaN, -0.0 and 0.0."""
    if dtype == "bool":
        return rng.random(n) < 0.5
    if dtype.startswith("float"):
        pool = np.array([np.nan, -0.0, 0.0, -np.nan, 1.5, -2.0, np.inf][:max(distinct, 3)], dtype)
        return rng.choice(pool, n)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -distinct), min(info.max, distinct), n, endpoint=True).astype(dtype)


def values_of(rng, spec: GroupSpec, n: int) -> list:
    out = []
    for agg in spec.aggs:
        if agg.op == "count":
            out.append(None)
        elif agg.dtype == "bool":
            out.append(rng.random(n) < (0.2 if agg.op == "any" else 0.9))
        elif agg.dtype.startswith("float"):
            v = (rng.standard_normal(n) * 1000).astype(agg.dtype)
            v[rng.random(n) < 0.01] = np.nan if agg.op in ("min", "max", "first") else 0
            out.append(v)
        else:
            out.append(rng.integers(-3, 4, n).astype(agg.dtype))
    return out


def check(stages, spec: GroupSpec, keys, values, params=(), exact_sums: bool = False) -> tuple:
    """Compare with group_reference; -> the result (for determinism checks)."""
    rows: list = []
    got_keys, got, counts = stages.group_by(spec, keys, values, params, rows)
    want_keys, want, want_counts = group_reference(spec, keys, values, params)
    assert counts.dtype == np.int64 and np.array_equal(counts, want_counts), (counts[:10], want_counts[:10])
    for g, w in zip(got_keys, want_keys):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), (g[:10], w[:10])
    for agg, v, g, w in zip(spec.aggs, values, got, want):
        assert g.dtype == np.dtype(agg.dtype) and len(g) == len(w), (agg, g.dtype, len(g), len(w))
        if agg.op == "sum" and agg.dtype.startswith("float") and not exact_sums:
            sorted_abs = np.abs(np.asarray(v, dtype=agg.dtype))[_order(spec, keys)]
            bound = counts * np.finfo(agg.dtype).eps * _segment_sums(sorted_abs, counts)
            assert np.all(np.abs(g - w) <= bound), (agg, np.max(np.abs(g - w) - bound))
        else:
            assert np.array_equal(g, w, equal_nan=g.dtype.kind == "f"), (agg, g[:10], w[:10])
    return got_keys, got, counts, rows


def _order(spec, keys):
    from querycompute._codegen import order_keys
    return order_keys.stable_order(list(keys), (False,) * len(keys))


def _segment_sums(x, counts):
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) if len(counts) else counts
    return np.add.reduceat(x, starts) if len(x) else x


@pytest.fixture(scope="module")
def gpu():
    from querycompute.backends.gpu.gpu_stages import opencl_stages
    try:
        stages = opencl_stages()
    except RuntimeError as exc:
        pytest.skip(f"no OpenCL device: {exc}")
    stages.caps = replace(stages.caps, group_tables=False)   # the sort path (the tables: test_issue14_gpu_group_table.py)
    return stages


# ---- OpenCL on pocl -------------------------------------------------------------------------------
# every key dtype, in three multi-key specs (one program each: pocl compiles slowly); with the
# other keys constant a spec groups by one key alone
KEY_SPECS = [GroupSpec(("bool", "float16"), BASIC_AGGS, (), "qc_g_k1"),
             GroupSpec(("int8", "uint64", "float64"), BASIC_AGGS, (), "qc_g_k2"),
             GroupSpec(("uint16", "int64"), BASIC_AGGS, (), "qc_g_k3")]


@pytest.mark.parametrize("spec", KEY_SPECS, ids=lambda s: "-".join(s.key_dtypes))
def test_item2_opencl_group_by_every_key_dtype(gpu, spec):
    rng = np.random.default_rng(len(spec.key_dtypes))
    m = len(spec.key_dtypes)
    for n in (1, 2, 1000, TILE, BIG):
        cols = [keys_of(rng, d, n) for d in spec.key_dtypes]
        for alone in [None, *range(m)]:          # every key varies, or key `alone` only
            keys = [c if alone in (None, j) else np.full(n, c[0]) for j, c in enumerate(cols)]
            _, _, _, rows = check(gpu, spec, keys, values_of(rng, spec, n))
            assert all(r.dialect == "opencl" for r in rows) and any("_group_downsweep" in r.name for r in rows)


def test_item2_opencl_every_aggregate_with_a_captured_param(gpu):
    spec = GroupSpec(("int32", "float32"), EVERY_AGGS, FOLD_PARAMS, "qc_g_every")
    rng = np.random.default_rng(1)
    for n in (1, 777, BIG):
        keys = [keys_of(rng, "int32", n, 3), keys_of(rng, "float32", n, 4)]
        for k in (0, -7):
            check(gpu, spec, keys, values_of(rng, spec, n), (k,))


def test_item2_opencl_edge_cases_empty_one_group_every_row_its_own(gpu):
    spec = GroupSpec(("int32", "float32"), EVERY_AGGS, FOLD_PARAMS, "qc_g_every")
    rng = np.random.default_rng(2)
    for n in (0, 5, BIG):
        one = [np.full(n, 3, np.int32), np.full(n, np.nan, np.float32)]
        check(gpu, spec, one, values_of(rng, spec, n), (2,))
        own = [rng.permutation(n).astype(np.int32), keys_of(rng, "float32", n)]
        _, _, counts, _ = check(gpu, spec, own, values_of(rng, spec, n), (2,))
        assert np.all(counts == 1)
    zero = [np.array([-0.0, 0.0, 0.0], np.float32)]           # -0.0 == 0.0: one group, the first's key
    keys, _, counts, _ = check(gpu, spec, [np.zeros(3, np.int32), zero[0]], values_of(rng, spec, 3), (2,))
    assert len(counts) == 1 and np.signbit(keys[1][0])


def test_item2_opencl_groups_across_tiles_and_scan_chunks(gpu):
    """More than 256 tiles (the one-block scan's chunks carry the open group on), groups far
    longer than a tile, and runs of one key across tile borders."""
    spec = KEY_SPECS[1]
    rng = np.random.default_rng(4)
    n = 257 * TILE + 300
    rest = [np.zeros(n, np.uint64), np.full(n, np.nan)]
    for first in (rng.integers(-2, 2, n).astype(np.int8), np.repeat(np.arange(-60, 60, dtype=np.int8), -(-n // 120))[:n]):
        check(gpu, spec, [first, *rest], values_of(rng, spec, n))


def test_item6_float_sums_bit_identical_run_to_run(gpu):
    spec = KEY_SPECS[2]
    rng = np.random.default_rng(5)
    keys = [rng.integers(0, 3, BIG).astype(np.uint16), np.zeros(BIG, np.int64)]
    values = values_of(rng, spec, BIG)
    first = check(gpu, spec, keys, values)
    again = gpu.group_by(spec, keys, values, (), [])
    assert first[1][0].tobytes() == again[1][0].tobytes()
    exact = [np.round(v) if v is not None and v.dtype.kind == "f" else v for v in values]
    check(gpu, spec, keys, exact, exact_sums=True)       # whole numbers: every order is exact


SMALL_KEYS = st.sampled_from([0.0, -0.0, 1.0, -1.5, float("nan"), float("inf")])


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, BIG + 40), seed=st.integers(0, 2 ** 16), groups=st.integers(1, 6))
def test_item6_opencl_group_by_property(gpu, n, seed, groups):
    spec = GroupSpec(("int32", "float32"), EVERY_AGGS, FOLD_PARAMS, "qc_g_every")
    rng = np.random.default_rng(seed)
    floats = np.array([0.0, -0.0, 1.0, -1.5, np.nan, np.inf], np.float32)[:groups]
    keys = [rng.integers(0, groups, n).astype(np.int32), rng.choice(floats, n)]
    check(gpu, spec, keys, values_of(rng, spec, n), (seed % 5,))


# ---- CUDA C and MSL through the CPU harness -----------------------------------------------------
def no_float64(aggs) -> tuple:
    """Metal has no double: its float sums accumulate in float32."""
    return tuple(GroupAgg(a.op, "float32") if a.dtype == "float64" else a for a in aggs)


HSPEC = {"cuda": GroupSpec(("float32", "int16"), EVERY_AGGS, FOLD_PARAMS, "qc_gh"),
         "metal": GroupSpec(("float32", "int16"), no_float64(EVERY_AGGS), FOLD_PARAMS, "qc_gh")}


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item2_harness_group_by(dialect):
    harness = pytest.importorskip("harness.plans")
    ok, why = harness.runner.available()
    if not ok:
        pytest.skip(why)
    spec = HSPEC[dialect]
    module = harness.module_for([group_op.render_group(spec, dialect)])
    stages = GpuStages(dialect, lambda ks: (harness.HarnessRuntime(ks, module), "compiled", 0.0))
    stages.caps = replace(stages.caps, group_tables=False)
    rng = np.random.default_rng(6)
    for n in (1, BIG):
        keys = [keys_of(rng, "float32", n, 4), keys_of(rng, "int16", n, 2)]
        check(stages, spec, keys, values_of(rng, spec, n), (3,))
    own = [rng.standard_normal(BIG).astype(np.float32), np.zeros(BIG, np.int16)]
    check(stages, spec, own, values_of(rng, spec, BIG), (3,))


# ---- compile checks: NVRTC (sm_80, sm_90) and Metal ------------------------------------------------
F16 = (GroupAgg("min", "float16"), GroupAgg("max", "float16"), GroupAgg("first", "float16"))


def every_set(dialect: str) -> list[L.KernelSet]:
    aggs = EVERY_AGGS + F16 if dialect != "metal" else no_float64(EVERY_AGGS + F16)
    wide = GroupSpec(tuple(KEY_DTYPES), aggs, FOLD_PARAMS, "qc_gall")
    fl = fold_aggs("float32")
    return [group_op.render_group(wide, dialect), group_op.render_group(wide, dialect, "int64"),
            group_op.render_group(GroupSpec(("float64",), fl[0] + (GroupAgg("sum", "float32"),), fl[1], "qc_gf"),
                                  dialect)]


def test_item2_every_group_kernel_compiles_with_nvrtc():
    for ks in every_set("cuda"):
        for arch in ARCHS:
            ptx_of(ks, arch, "group.cu")


def test_item2_every_group_kernel_passes_the_metal_compile_check(tmp_path):
    for i, ks in enumerate(every_set("metal")):
        metal_compiles(ks.source, tmp_path, f"g{i}")


# ---- the launch plan and the bytes moved ---------------------------------------------------------
def test_item2_plan_sort_then_three_group_kernels():
    spec = GroupSpec(("float32",), BASIC_AGGS, (), "qc_gp")
    ks = group_op.render_group(spec, "opencl")
    assert ks.shape == "group" and "group" in L.COUNTED_SHAPES
    names = [l.name for l in L.plan(ks, TILE, True)]
    assert names == ["qc_gp_small", "qc_gp_group_partials", "qc_gp_group_scan", "qc_gp_group_downsweep"]
    large = L.plan(ks, BIG, True)
    # the sort: one counting launch, then a scan + scatter per pass (ops/sort/gpu.py's folded counts)
    assert len(large) == 1 + 4 * 2 + 3 and large[-1].grid == -(-BIG // TILE) and large[-2].grid == 1
    per = dict(group_op.bytes_per_element(spec))
    # partials: index 4 + key 4 + float64 and float32 values 12 + head flag 1
    assert per["qc_gp_group_partials"] == 21 and per["qc_gp_group_downsweep (writes, per group)"] == 4 + 8 + 4 + 4 + 8
    assert "group_by of (float32)" in group_op.describe(spec)


def test_item5_explain_gives_the_group_kernels_bytes_per_element():
    import querycompute as qc
    g = qc.query(flag=np.arange(10, dtype=np.int32), price=np.arange(10.0)).group_by(lambda r: r.flag)
    text = g.explain(backend="opencl", total=qc.sum(lambda r: r.price))
    assert "radix sort + head flags + segmented reduce-then-scan" in text
    assert "_group_partials:" in text and "_group_downsweep:" in text and "total:" in text
    assert "_group_downsweep" in g.source(backend="cuda", total=qc.sum(lambda r: r.price))
