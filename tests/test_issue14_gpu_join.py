"""Issue 14 item 3 on the GPU dialects: the device hash join (querycompute/_codegen/ops/
ops/join/gpu.py, run by backends/gpu_join.py through GpuStages.join): its index pairs equal
ops/join/reference.join_reference's (LINQ's order) on OpenCL (pocl) and for CUDA C and MSL through the
CPU harness; a join -> where -> group_by query on opencl equals the numpy backend's with no
host round trip between stages (device_columns.TRANSFERS); explain() lists the join's
kernels; every join kernel compiles with NVRTC (sm_80, sm_90) and passes the Metal check.

Inputs: n >= 3 tiles of 1024 rows and not a multiple of one; duplicate keys on both sides;
NaN, -NaN, -0.0 and 0.0 float keys; one key every row shares (a long bucket); empty sides;
no matches; keys of two dtypes (compared in their common type); tuple keys.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from compile_checks import ARCHS, metal_compiles, ptx_of

import querycompute as qc
from querycompute._codegen.ops.join import gpu as J
from querycompute._codegen.ops.sort.ir import TILE
from querycompute.backends.gpu.gpu_stages import GpuStages
from querycompute._codegen.ops.join.reference import join_reference

BIG = 3 * TILE + 17


def keys_of(rng, dtype: str, n: int, distinct: int = 40) -> np.ndarray:
    if dtype.startswith("float"):
        pool = np.array([np.nan, -np.nan, -0.0, 0.0, 1.5, -2.0, np.inf, 7.25][:max(distinct, 4)], dtype)
        return rng.choice(pool, n)
    hi = min(np.iinfo(dtype).max, distinct)
    return rng.integers(0, hi, n, endpoint=True).astype(dtype)


def check(stages, left, right, outer: bool) -> list:
    rows: list = []
    li, ri = stages.join(left, right, outer, rows)
    want_l, want_r = join_reference(left, right, outer)
    assert li.dtype == np.int64 and ri.dtype == np.int64
    assert np.array_equal(li, want_l) and np.array_equal(ri, want_r), (len(li), len(want_l))
    return rows if len(li) else []


def cases(rng, dtypes_l, dtypes_r):
    """(left keys, right keys) pairs: sizes either side of the other (both build sides),
    a long run of one key, no matches, empty sides."""
    def side(dtypes, n, distinct=40):
        return [keys_of(rng, d, n, distinct) for d in dtypes]
    yield side(dtypes_l, BIG), side(dtypes_r, 700)                      # built on the right
    yield side(dtypes_l, 300), side(dtypes_r, BIG)                      # built on the left
    yield side(dtypes_l, 5), side(dtypes_r, 3)
    yield side(dtypes_l, 40, 1), side(dtypes_r, BIG, 1)                 # every row one key
    yield side(dtypes_l, 50), [(k + 100).astype(k.dtype) if k.dtype.kind in "iu" else np.full(len(k), 99.0, k.dtype)
                               for k in side(dtypes_r, 60)]             # no matches
    yield side(dtypes_l, 0), side(dtypes_r, 10)
    yield side(dtypes_l, 10), side(dtypes_r, 0)


# ---- OpenCL on pocl ---------------------------------------------------------------------------------
# one hash program per side's dtypes (pocl builds slowly): int64 keys run in the query below
@pytest.mark.parametrize("dtypes", [(("int32",), ("int32",)), (("uint8",), ("int16",)),
                                    (("float64",), ("float64",)), (("int16", "float32"), ("int16", "float32"))],
                         ids=lambda d: "-".join(d[0]) + "_vs_" + "-".join(d[1]))
def test_item3_opencl_pairs_equal_the_reference(gpu, dtypes):
    rng = np.random.default_rng(len(dtypes[0]) * 7 + len(dtypes[1][0]))
    for left, right in cases(rng, *dtypes):
        for outer in (False, True):
            rows = check(gpu, left, right, outer)
            if rows:                                 # some pairs (none: the count said so)
                names = [r.name for r in rows]
                assert all(r.dialect == "opencl" for r in rows) and "qc_join_pairs" in names, names
                if not outer and len(left[0]) < len(right[0]):       # built on the left
                    assert any(n.startswith("qc_join_by_left") for n in names), names


def test_item3_opencl_float_keys_nan_and_signed_zero_match(gpu):
    """All NaNs one key, -0.0 == 0.0: plain Python's nested loops in LINQ's order."""
    left = [np.array([np.nan, -0.0, 0.0, 1.0, -np.nan], np.float64)]
    right = [np.array([0.0, np.nan, 2.0, -0.0], np.float64)]
    same = lambda a, b: (a != a and b != b) or a == b  # noqa: E731
    want = [(i, j) for i, a in enumerate(left[0].tolist()) for j, b in enumerate(right[0].tolist()) if same(a, b)]
    li, ri = gpu.join(left, right, False, [])
    assert list(zip(li.tolist(), ri.tolist())) == want
    check(gpu, left, right, True)


def test_item3_wide_or_float_converted_keys_run_the_host_reference(gpu):
    rng = np.random.default_rng(3)
    wide = ([keys_of(rng, "int64", 50), keys_of(rng, "int32", 50)], [keys_of(rng, "int64", 20), keys_of(rng, "int32", 20)])
    conv = ([keys_of(rng, "float32", 50)], [keys_of(rng, "float64", 20)])
    for left, right in (wide, conv):
        rows = check(gpu, left, right, False)
        assert rows and [r.dialect for r in rows] == ["numpy"]


# ---- a whole query on opencl: join -> where -> group_by stays on the device ---------------------------
def orders_items(n_orders: int = 700, n_items: int = BIG):
    rng = np.random.default_rng(12)
    orders = {"okey": rng.permutation(n_orders).astype(np.int64), "prio": rng.integers(0, 5, n_orders).astype(np.int8)}
    items = {"okey": rng.integers(0, n_orders + 100, n_items).astype(np.int64),
             "qty": rng.integers(1, 50, n_items).astype(np.float64)}
    return orders, items


def q12_like(backend: str, outer: bool):
    orders, items = orders_items()
    base = qc.query(items).on(backend).where(lambda i: i.qty > 5)
    join = base.left_join if outer else base.join
    return join(qc.query(orders), lambda i: i.okey, lambda o: o.okey, lambda i, o: {"qty": i.qty, "prio": o.prio}) \
        .where(lambda r: r.qty < 40).group_by(lambda r: r.prio).agg(n=qc.count(), s=qc.sum(lambda r: r.qty))


@pytest.mark.skipif(not qc.backends()["opencl"]["available"], reason="no OpenCL device")
@pytest.mark.parametrize("outer", [False, True])
def test_item2_join_where_group_by_on_opencl_stays_on_the_device(outer):
    from querycompute.backends.gpu.device_columns import TRANSFERS
    want = q12_like("numpy", outer)
    q12_like("opencl", outer)                      # compiled and warm
    before = dict(TRANSFERS)
    got = q12_like("opencl", outer)
    moved = {k: TRANSFERS[k] - before[k] for k in TRANSFERS}
    runs = qc.last_trace().kernels
    assert all(r.dialect == "opencl" for r in runs), [(r.name, r.dialect) for r in runs]
    assert any(r.name == "qc_join_pairs" for r in runs)
    for k in want:                                 # whole-number sums: exact in every order
        assert np.array_equal(want[k], got[k]), k
    # over: both sources (items 2 columns; orders' key, then its 2 columns for the gathers;
    # a left join also its matched flags, one more column of the other side: issue 29)
    assert moved["to_device"] == (6 if outer else 5), moved
    # back: the groups, and 8-byte counts (2 compactions' survivors, the pairs, the groups)
    result = sum(np.asarray(v).nbytes for v in got.values())
    assert moved["to_host_bytes"] <= result + 4 * 8, (moved, result)


@pytest.mark.skipif(not qc.backends()["opencl"]["available"], reason="no OpenCL device")
def test_item2_join_where_sum_and_to_array_on_opencl_read_back_only_the_result():
    from querycompute.backends.gpu.device_columns import TRANSFERS
    orders, items = orders_items()

    def joined(backend):
        return qc.query(items).on(backend).join(qc.query(orders), lambda i: i.okey, lambda o: o.okey,
                                                lambda i, o: {"qty": i.qty, "prio": o.prio}).where(lambda r: r.prio > 1)
    for run in (lambda q: q.sum(lambda r: r.qty), lambda q: q.select(lambda r: r.qty * 2).to_array()):
        want = run(joined("numpy"))
        run(joined("opencl"))
        before = dict(TRANSFERS)
        got = run(joined("opencl"))
        moved = {k: TRANSFERS[k] - before[k] for k in TRANSFERS}
        assert np.array_equal(got, want)           # whole numbers: the sum is exact in any order
        assert all(r.dialect == "opencl" for r in qc.last_trace().kernels)
        assert moved["to_host_bytes"] <= np.asarray(got).nbytes + 3 * 8, moved


def test_item3_opencl_gather_filled_gives_left_joins_fill_values(gpu):
    from querycompute._codegen.ops.join.reference import gather_filled
    rng = np.random.default_rng(5)
    cols = [rng.random(50).astype(np.float32), rng.random(50) < 0.5, rng.integers(-9, 9, 50),
            rng.random(50).astype(np.float16)]
    idx = rng.integers(-1, 50, BIG)
    got = gpu.gather_filled(cols, idx, [])
    for g, c in zip(got, cols):
        w = gather_filled(c, idx)
        assert g.dtype == c.dtype and g.tobytes() == w.tobytes(), c.dtype     # NaN bits too


@settings(max_examples=25, deadline=None)
@given(nl=st.integers(0, 2 * TILE + 40), nr=st.integers(0, 300), distinct=st.integers(1, 60),
       seed=st.integers(0, 2 ** 16), outer=st.booleans())
def test_item3_opencl_pairs_property(gpu, nl, nr, distinct, seed, outer):
    rng = np.random.default_rng(seed)
    check(gpu, [keys_of(rng, "int32", nl, distinct)], [keys_of(rng, "int32", nr, distinct)], outer)
    check(gpu, [keys_of(rng, "int32", nr, distinct)], [keys_of(rng, "int32", nl, distinct)], outer)


def test_item2_explain_lists_the_join_kernels_and_bytes_per_row():
    orders, items = orders_items(10, 20)
    q = qc.query(items).join(qc.query(orders), lambda i: i.okey, lambda o: o.okey, lambda i, o: (i.qty, o.prio))
    text = q.explain(backend="opencl")
    assert "device hash join" in text and "qc_join_count" in text and "qc_join_pairs" in text
    assert "qc_join_hash (per row of each side; 64-bit h): 16 B" in text     # int64 key 8 B + h 8 B


@pytest.mark.skipif(not qc.backends()["webgpu"]["available"], reason="webgpu not built")
def test_item3_webgpu_joins_on_the_host_reference_and_says_why():
    rng = np.random.default_rng(4)
    left = {"k": rng.integers(0, 9, 300).astype(np.int32), "v": rng.random(300).astype(np.float32)}
    right = {"k": rng.integers(0, 12, 40).astype(np.int32), "w": rng.random(40).astype(np.float32)}

    def q(backend):
        return qc.query(left).on(backend).left_join(qc.query(right), lambda a: a.k, lambda b: b.k,
                                                    lambda a, b: (a.v, b.w)).where(lambda r: r[0] > 0.1)
    got, want = q("webgpu").to_array(), q("numpy").to_array()
    assert all(np.array_equal(g, w, equal_nan=True) for g, w in zip(got, want))
    assert "WGSL has no 64-bit integers" in q("webgpu").explain(backend="webgpu")


# ---- CUDA C and MSL through the CPU harness ----------------------------------------------------------
def harness_stages(dialect: str) -> GpuStages:
    harness = pytest.importorskip("harness.plans")
    ok, why = harness.runner.available()
    if not ok:
        pytest.skip(why)
    return GpuStages(dialect, lambda ks: (harness.HarnessRuntime(ks, harness.module_for([ks])), "compiled", 0.0))


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item3_harness_pairs_equal_the_reference(dialect):
    """Small sizes (the harness runs every block on CPU threads), still several tiles."""
    stages = harness_stages(dialect)
    rng = np.random.default_rng(9)
    tup = ("int16", "float32")
    side = lambda dtypes, n, distinct: [keys_of(rng, d, n, distinct) for d in dtypes]  # noqa: E731
    for left, right, outer in ((side(tup, BIG, 300), side(("int8", "float32"), 300, 300), True),   # built right
                               (side(tup, 300, 300), side(tup, BIG, 300), False),                   # built left
                               (side(tup, 7, 2), side(tup, 0, 2), True)):
        rows = check(stages, left, right, outer)
        assert all(r.dialect == dialect for r in rows)
    rows = check(stages, [keys_of(rng, "int32", BIG, 300)], [keys_of(rng, "int32", 400, 300)], False)
    assert rows and all(r.dialect == dialect for r in rows)     # a 32-bit hash
    if dialect == "cuda":                                   # Metal has no double
        rows = check(stages, [keys_of(rng, "float64", 500)], [keys_of(rng, "float64", 30)], True)
        assert rows and all(r.dialect == dialect for r in rows)


# ---- compile checks: NVRTC (sm_80, sm_90) and Metal -------------------------------------------------
def every_set(dialect: str) -> list:
    from querycompute.backends.gpu.gpu_join import OFFSETS, by_left_sort, build_sort
    from querycompute._codegen.ops.sort import gather_gpu as gather_op
    from querycompute._codegen.ops.scan import gpu as scan_op
    from querycompute._codegen.ops.sort import gpu as sort_op
    out = [J.render_hash(("uint8", "int16", "float32"), ("int16", "int16", "float32"), dialect, "qc_join_hash_t"),
           J.render_hash(("uint8", "int16"), ("int16", "int16"), dialect, "qc_join_hash_t32"),
           J.render_gather_filled(("float32", "bool", "int64"), dialect)]
    for idx, hd in (("int32", "uint32"), ("int32", "uint64"), ("int64", "uint64")):
        out += [J.render_probe(dialect, idx, hd)["pairs"], sort_op.render_sort(build_sort(hd), dialect, idx),
                sort_op.render_sort(by_left_sort(idx), dialect, idx),
                gather_op.render_gather((hd,), dialect, idx)]
    return out + [scan_op.render(OFFSETS, dialect)]


def test_item3_every_join_kernel_compiles_with_nvrtc():
    for i, ks in enumerate(every_set("cuda")):
        for arch in ARCHS:
            ptx_of(ks, arch, f"join{i}.cu")


def test_item3_every_join_kernel_passes_the_metal_compile_check(tmp_path):
    for i, ks in enumerate(every_set("metal")):
        metal_compiles(ks.source, tmp_path, f"j{i}")


def test_item3_wgsl_has_no_join_kernels_and_says_why():
    assert "64-bit" in J.dialects_without_join["webgpu"]
    with pytest.raises(ValueError, match="wider than 64 bits"):
        J.render_hash(("int64", "int8"), ("int64", "int8"), "cuda", "qc_join_hash_w")
