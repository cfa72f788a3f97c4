"""Issue 14 item 2: the cpu backend's group_by (backends/cpu_group.py, numba) against the
reference ops/group/reference.group_reference on every key type (NaN keys one group and last,
-0.0 == 0.0, the group key the key of the group's first row, bit for bit), key tuples
(packed into one word and wider than 64 bits), empty input, one group, every row its own
group, n not a multiple of the chunk and n over three chunks; every aggregate (sum, min,
max, count, any, all, first, fold with a captured param) over several value types.

Tolerance of float sums (the cpu folds per source chunk, the reference np.add.reduceat
over the sorted rows; both exact up to rounding): |cpu - ref| <= 4 * rows * eps * sum|x|
per group (float16 sums accumulate in float32 on both sides, then one rounding to
float16: 2 float16 ulps). Integer sums, min, max, any, all, first and count are exact.
Float results are bit-identical run to run, serial vs parallel, and between the
low-cardinality (hash tables) and sort paths (item 6: fixed-order float sums)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from querycompute._codegen.ir import expr as E
from querycompute._codegen.dialects.numba_py import CHUNK
from querycompute._codegen.ir.program import ParamSpec
from querycompute._codegen.ir.stage_specs import GroupAgg, GroupSpec
from querycompute.backends.cpu import cpu as _cpu
from querycompute.backends.cpu.cpu_stages import CpuStages
from querycompute._codegen.ops.group.reference import group_reference

CPU = CpuStages()
BIG = 3 * CHUNK + 123                      # the parallel kernels, a ragged last chunk
KEY_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "float16", "float32", "float64"]

_ACC64, _IT64 = E.Var("acc", "int64"), E.Var("item", "int64")
_ACCF, _ITF = E.Var("acc", "float64"), E.Var("item", "float64")
# associative, not commutative in general: acc + item - p (the seed once, then each row)
FOLD_INT = GroupAgg("fold", "int64", E.Binary("sub", E.Binary("add", _ACC64, _IT64, "int64"),
                                              E.Param("p", "int64"), "int64"), E.Const(7, "int64"))
FOLD_MAX = GroupAgg("fold", "float64", E.Where(E.Compare("gt", _ITF, _ACCF), _ITF, _ACCF, "float64"),
                    E.Const(-1e300, "float64"))
AGGS = (GroupAgg("count", "int64"), GroupAgg("sum", "float64"), GroupAgg("sum", "float32"),
        GroupAgg("sum", "float16"), GroupAgg("sum", "int64"), GroupAgg("sum", "int8"),
        GroupAgg("min", "float64"), GroupAgg("max", "float64"), GroupAgg("min", "float16"),
        GroupAgg("max", "int32"), GroupAgg("min", "uint8"), GroupAgg("any", "bool"),
        GroupAgg("all", "bool"), GroupAgg("first", "float64"), GroupAgg("first", "int16"),
        FOLD_INT, FOLD_MAX)
PARAMS = (ParamSpec("p", "int64"),)


def keys_of(dtype: str, n: int, seed: int = 0, distinct: int = 50) -> np.ndarray:
    """n keys of `dtype` from a small pool, with NaN (two payloads), -0.0, 0.0 and inf."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind == "f":
        pool = np.concatenate([rng.standard_normal(distinct) * 100,
                               [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf]]).astype(dt)
    else:
        info = np.iinfo(dt)
        pool = np.concatenate([rng.integers(info.min, info.max, distinct, dtype=dt, endpoint=True),
                               np.array([info.min, info.max, 0, 1], dtype=dt)])
    return pool[rng.integers(0, len(pool), n)]


def values_of(n: int, seed: int = 1) -> list:
    """One value column per AGGS entry (None for count), NaN among the float64 values."""
    rng = np.random.default_rng(seed)
    f = rng.standard_normal(n) * 100
    f[rng.random(n) < 0.001] = np.nan
    out = []
    for a in AGGS:
        if a.op == "count":
            out.append(None)
        elif a.dtype == "bool":
            out.append(rng.random(n) < (0.01 if a.op == "any" else 0.99))
        elif a.dtype.startswith("float"):
            out.append((f if a.op in ("min", "max", "first") else rng.standard_normal(n) * 100).astype(a.dtype))
        else:
            info = np.iinfo(a.dtype)
            out.append(rng.integers(max(info.min, -1000), min(info.max, 1000), n).astype(a.dtype))
    return out


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.dtype.itemsize}") if a.dtype != bool else a


def run(keys, vals, stages=CPU, params=(3,)):
    spec = GroupSpec(tuple(str(k.dtype) for k in keys), AGGS, PARAMS)
    return stages.group_by(spec, keys, vals, list(params), [])


def check(keys, vals, out=None):
    """cpu == reference (module doc's tolerance for float sums)."""
    spec = GroupSpec(tuple(str(k.dtype) for k in keys), AGGS, PARAMS)
    gk, res, counts = run(keys, vals) if out is None else out
    rk, rres, rcounts = group_reference(spec, keys, vals, [3])
    assert counts.dtype == np.int64 and np.array_equal(counts, rcounts)
    for a, b in zip(gk, rk):                 # the key of the group's first row, bit for bit
        assert a.dtype == b.dtype and np.array_equal(bits(a), bits(b))
    for agg, v, a, b in zip(AGGS, vals, res, rres):
        assert a.dtype == np.dtype(agg.dtype) and a.shape == b.shape, agg
        if agg.op == "sum" and agg.dtype.startswith("float"):
            av = np.abs(np.asarray(v, np.float64))
            mag = np.zeros(len(b)) if not len(b) else _segment_sums(keys, av)
            eps = np.finfo(agg.dtype).eps
            tol = 4 * np.maximum(counts, 1) * np.finfo(np.float32 if agg.dtype == "float16" else agg.dtype).eps * mag
            tol += 2 * eps * np.abs(b.astype(np.float64))
            assert np.all(np.abs(a.astype(np.float64) - b.astype(np.float64)) <= tol), agg
        else:
            np.testing.assert_array_equal(a, b, err_msg=str(agg))
    return gk, res, counts


def _segment_sums(keys, x):
    spec = GroupSpec(tuple(str(k.dtype) for k in keys), (GroupAgg("sum", "float64"),))
    return group_reference(spec, keys, [x], [])[1][0]


def same_bits(o1, o2):
    for a, b in zip(o1[0] + o1[1] + [o1[2]], o2[0] + o2[1] + [o2[2]]):
        assert a.dtype == b.dtype and np.array_equal(bits(a), bits(b))


@pytest.mark.parametrize("n", [0, 1, 1000, BIG])
@pytest.mark.parametrize("dtype", KEY_DTYPES)
def test_item2_group_by_every_key_dtype(dtype, n):
    keys = [keys_of(dtype, n, seed=n)]
    check(keys, values_of(n))


@pytest.mark.parametrize("dtypes, n", [(("int8", "bool"), BIG), (("uint16", "float32", "int8"), 500),
                                       (("float64", "int32"), BIG), (("float16", "int64", "uint8"), 500)])
def test_item2_group_by_key_tuples(dtypes, n):
    """Packed into one word (<= 64 bits) and wider tuples (the sort path)."""
    keys = [keys_of(d, n, seed=i, distinct=4) for i, d in enumerate(dtypes)]
    check(keys, values_of(n))


@pytest.mark.parametrize("n", [1, 5000, BIG])
def test_item2_group_by_one_group_and_every_row_its_own(n):
    vals = values_of(n)
    check([np.full(n, -0.0)], vals)                      # one group
    check([np.zeros(n, bool)], vals)
    own = np.random.default_rng(2).permutation(n).astype(np.int64)
    check([own], vals)                                   # every row its own group
    check([own.astype(np.float64), own.astype(np.int32)], vals)


def test_item2_group_by_float16_fold_and_float_params():
    """A float16 fold and a float16 captured param (rounded like the numpy backend)."""
    acc, item = E.Var("acc", "float16"), E.Var("item", "float16")
    agg = GroupAgg("fold", "float16", E.Binary("add", E.Binary("mul", acc, E.Param("q", "float16"), "float16"),
                                               E.Binary("mul", item, E.Param("q", "float16"), "float16"),
                                               "float16"), E.Const(0.0, "float16"))
    spec = GroupSpec(("int8",), (agg, GroupAgg("max", "float16")), (ParamSpec("q", "float16"),))
    keys = [keys_of("int8", 4000, distinct=3)]
    v = (np.random.default_rng(3).random(4000) * 4 - 2).astype(np.float16)
    _, res, _ = CPU.group_by(spec, keys, [v, v], [np.float16(1.0)], [])
    _, ref, _ = group_reference(spec, keys, [v, v], [np.float16(1.0)])
    np.testing.assert_array_equal(res[1], ref[1])
    np.testing.assert_allclose(res[0].astype(np.float64), ref[0].astype(np.float64), rtol=0.02, atol=0.5)


def test_item6_group_by_float_sums_bit_identical_runs_paths_and_threads(monkeypatch):
    """Run to run, serial vs parallel kernels, hash tables vs the sort path: same bits."""
    n = BIG
    for keys in ([keys_of("float64", n, distinct=6)], [keys_of("int8", n), keys_of("bool", n)]):
        vals = values_of(n)
        first = check(keys, vals)
        same_bits(first, run(keys, vals))
        sort_path = CpuStages()
        sort_path.group_by(GroupSpec(("int8",), (GroupAgg("count", "int64"),)), [keys[0][:1]], [None], [], [])
        sort_path._group.limit = 1                       # any input with 2 groups takes the sort
        same_bits(first, run(keys, vals, sort_path))
        monkeypatch.setitem(_cpu._parallel, "allowed", False)
        rows: list = []
        spec = GroupSpec(tuple(str(k.dtype) for k in keys), AGGS, PARAMS)
        serial = CPU.group_by(spec, keys, vals, [3], rows)
        assert rows and not any(r.name.endswith(("_parallel", "_morsels")) for r in rows)
        same_bits(first, serial)
        monkeypatch.setitem(_cpu._parallel, "allowed", True)


def test_item2_group_by_trace_names_its_kernels():
    rows: list = []
    keys = [keys_of("int32", BIG, distinct=3)]
    run_spec = GroupSpec(("int32",), (GroupAgg("sum", "float64"),), name="qc_grp")
    CPU.group_by(run_spec, keys, [np.ones(BIG)], [], rows)
    names = [r.name for r in rows]
    steps = [n.removesuffix("_inline").removesuffix("_morsels") for n in names]
    assert steps == ["qc_grp_group_local_ids", "qc_grp_group_merge_ids", "qc_grp_aggs_low_alloc",
                     "qc_grp_aggs_low_chunks", "qc_grp_aggs_merge", "gather_chunks"], names


_KEY_POOL = [0.0, -0.0, 1.5, -2.0, np.nan, np.inf]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_KEY_POOL), st.integers(-3, 3),
                          st.floats(-1e3, 1e3, allow_nan=False)), max_size=60))
def test_item6_group_by_random_small_inputs(rows):
    """Random (float key, int key, value) rows, single and tuple keys."""
    k1 = np.array([r[0] for r in rows], np.float64)
    k2 = np.array([r[1] for r in rows], np.int16)
    x = np.array([r[2] for r in rows], np.float64)
    vals = values_of(len(rows))
    vals[1] = x
    check([k1], vals)
    check([k2, k1], vals)


@pytest.mark.parametrize("dtype", ["int64", "float64", "uint16"])
def test_issue29_group_by_of_a_sorted_key_finds_runs_without_a_sort(dtype):
    """Over 4096 groups (the sort path): a key already in ascending order bits (NaNs last,
    -0.0 and 0.0 one group; a ragged last chunk; equal keys across a chunk boundary) takes
    one pass that checks it and finds the runs (sorted_breaks_chunks) and no radix sort, bit for bit the reference's and the
    sort path's (the same input shuffled by one pair of rows is sorted)."""
    n = BIG
    rng = np.random.default_rng(29)
    if dtype == "float64":
        k = np.sort(np.concatenate([rng.integers(-3000, 3000, n - 40) / 2.0, [np.nan] * 20, [0.0] * 10, [-0.0] * 10]))
    else:
        k = np.sort(rng.integers(0, 6000, n)).astype(dtype)
    keys, vals = [k], values_of(n)
    rows: list = []
    spec = GroupSpec((dtype,), AGGS, PARAMS)
    sorted_out = CPU.group_by(spec, keys, vals, [3], rows)
    names = [r.name for r in rows]
    assert any("sorted_breaks_chunks" in x for x in names) and not any("radix" in x for x in names), names
    check(keys, vals, sorted_out)
    swapped = k.copy()
    i = int(np.flatnonzero(k[1:] != k[:-1])[0])       # the first break: swap across it
    swapped[[i, i + 1]] = swapped[[i + 1, i]]
    rows = []
    out = CPU.group_by(spec, [swapped], vals, [3], rows)
    assert any("radix" in r.name for r in rows), [r.name for r in rows]
    check([swapped], vals, out)
