"""Issue 14 item 2: the GPU low-cardinality group_by (querycompute/_codegen/ops/group/table_gpu.py,
backends/gpu_group_table.py): per-chunk private hash tables merged in chunk order, tried by
GpuStages.group_by before the sort path, which runs when the tables overflow (> 4096 groups).
OpenCL on pocl, CUDA C and MSL through the CPU harness, every result against the numpy
oracle `ops/group/reference.group_reference` (the comparisons of test_issue14_gpu_group.check:
keys bit for bit, counts and non-sum aggregates exactly, float sums within the rounding
bound of any order); the float sums are the same bits run to run and on two grid sizes.
One spec with every aggregate (sum, count, min, max, first, any, all, two folds with a
captured parameter) keeps the number of programs small (pocl and g++ builds are slow).
"""
from __future__ import annotations

import numpy as np
import pytest
from compile_checks import ARCHS, metal_compiles, ptx_of
from test_issue14_gpu_group import EVERY_AGGS, FOLD_PARAMS, check, keys_of, no_float64, values_of

from querycompute._codegen import order_keys
from querycompute._codegen.ops.group import table_gpu as table_op
from querycompute._codegen.ir.stage_specs import GroupSpec
from querycompute.backends.gpu.gpu_group_table import run as run_tables
from querycompute.backends.gpu.gpu_stages import GpuStages

SPEC = GroupSpec(("int32", "float32"), EVERY_AGGS, FOLD_PARAMS, "qc_g_every")
MSPEC = GroupSpec(("int32", "float32"), no_float64(EVERY_AGGS), FOLD_PARAMS, "qc_g_every")
SIZES = (1, 200, 3000)          # one row; one chunk (one block's rows); >= 3 chunks


def ran(rows, what: str) -> bool:
    return any(what in r.name for r in rows)


def cases(stages, spec, seed: int, fallback: bool = True) -> None:
    """n = 1, one chunk, several chunks; NaN / -0.0 keys; exactly 4096 groups on the tables;
    4097 groups: the tables report the overflow, and (`fallback`) the sort path's results."""
    rng = np.random.default_rng(seed)
    for n in SIZES:
        keys = [keys_of(rng, "int32", n, 3), keys_of(rng, "float32", n, 4)]
        *_, rows = check(stages, spec, keys, values_of(rng, spec, n), (n % 5,))
        assert ran(rows, "_table_merge") and not ran(rows, "_group_downsweep")
    nan = np.array([np.nan, -np.nan, -0.0, 0.0], np.float32)
    keys = [np.zeros(600, np.int32), rng.choice(nan, 600)]            # NaN payloads: one group
    got_keys, _, counts, rows = check(stages, spec, keys, values_of(rng, spec, 600), (1,))
    assert len(counts) == 2 and ran(rows, "_table_merge")
    for groups in (4096, 4097):
        n = 2 * groups + 5
        keys = [rng.permutation(np.resize(np.arange(groups, dtype=np.int32), n)), np.ones(n, np.float32)]
        values = values_of(rng, spec, n)
        vals = [v for a, v in zip(spec.aggs, values) if a.op != "count"]
        tables = run_tables(stages, spec, [k.view(order_keys.bits_dtype(str(k.dtype))) for k in keys], vals, (2,), n, [])
        assert (tables is None) == (groups > table_op.MAX_GROUPS)
        if groups <= table_op.MAX_GROUPS or fallback:
            *_, counts, rows = check(stages, spec, keys, values, (2,))
            assert len(counts) == groups and ran(rows, "_table_merge")
            assert ran(rows, "_group_downsweep") == (groups > table_op.MAX_GROUPS)


def test_item2_opencl_group_tables(gpu):
    cases(gpu, SPEC, 1)


def test_item2_opencl_group_tables_float_sums_bit_identical_run_to_run(gpu):
    rng = np.random.default_rng(2)
    n = 5000
    keys = [keys_of(rng, "int32", n, 3), keys_of(rng, "float32", n, 4)]
    values = values_of(rng, SPEC, n)
    first = gpu.group_by(SPEC, keys, values, (1,), [])
    again = gpu.group_by(SPEC, keys, values, (1,), [])
    assert first[1][0].tobytes() == again[1][0].tobytes()


# ---- CUDA C and MSL through the CPU harness -----------------------------------------------------
def harness_stages(dialect: str, spec, resident=None):
    harness = pytest.importorskip("harness.plans")
    ok, why = harness.runner.available()
    if not ok:
        pytest.skip(why)
    module = harness.module_for([table_op.render_group_table(spec, dialect)])      # no fallback here

    def build(ks):
        rt = harness.HarnessRuntime(ks, module)
        rt.resident = resident            # caps the physical grid of the partials kernel
        return rt, "compiled", 0.0
    return GpuStages(dialect, build)


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item2_harness_group_tables(dialect):
    spec = SPEC if dialect == "cuda" else MSPEC
    stages = harness_stages(dialect, spec)
    cases(stages, spec, 3, fallback=False)          # the sort path: test_issue14_gpu_group.py
    # two grid sizes: min(tiles, 1024) blocks and 3 blocks looping over the 64 chunks
    three = harness_stages(dialect, spec, resident=3)
    rng = np.random.default_rng(4)
    n = 40_000
    keys = [keys_of(rng, "int32", n, 3), keys_of(rng, "float32", n, 4)]
    values = values_of(rng, spec, n)
    rows_a, rows_b = [], []
    a = stages.group_by(spec, keys, values, (1,), rows_a)
    b = three.group_by(spec, keys, values, (1,), rows_b)
    grids = {r.grid[0] for r in rows_a if r.name.endswith("_table_partials")}
    assert grids == {-(-n // 1024)} and {r.grid[0] for r in rows_b if r.name.endswith("_table_partials")} == {3}
    for x, y in zip(a[1], b[1]):
        assert x.tobytes() == y.tobytes()
    check(three, spec, keys, values, (1,))


# ---- compile checks, the plan and explain ---------------------------------------------------------
def test_item2_group_table_kernels_compile_with_nvrtc_and_metal(tmp_path):
    wide = GroupSpec(("bool", "int8", "uint64", "float16", "float64"), EVERY_AGGS, FOLD_PARAMS, "qc_gtw")
    for arch in ARCHS:
        ptx_of(table_op.render_group_table(wide, "cuda"), arch, "group_table.cu")
    metal = GroupSpec(("bool", "int8", "uint64", "float16"), no_float64(EVERY_AGGS), FOLD_PARAMS, "qc_gtw")
    metal_compiles(table_op.render_group_table(metal, "metal").source, tmp_path, "gt")


def test_item5_explain_gives_the_table_path_bytes_per_element():
    import querycompute as qc
    g = qc.query(flag=np.arange(10, dtype=np.int32), price=np.arange(10.0)).group_by(lambda r: r.flag)
    text = g.explain(backend="opencl", total=qc.sum(lambda r: r.price))
    assert "tried first: group_by of (int32), <= 4096 groups" in text
    assert "_table_partials: 12 B per element" in text          # int32 key + float64 price
    assert "_table_merge" in g.source(backend="cuda", total=qc.sum(lambda r: r.price))
    flags = qc.query(flag=np.arange(10, dtype=np.uint8), price=np.arange(10.0)).group_by(lambda r: r.flag)
    assert "not tried (keys of at most 2 bytes" in flags.explain(backend="opencl", total=qc.sum(lambda r: r.price))
    assert not table_op.worth_trying(GroupSpec(("uint8", "int8"), EVERY_AGGS, FOLD_PARAMS, "qc_g_flags"))
