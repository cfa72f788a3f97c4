"""Issue 13 item 2: the cpu backend's column operations (backends/cpu_stages.py, numba)
equal the numpy reference (stage_runtime.NumpyStages) on every key type, with NaN, -0.0,
inf, all-equal keys, empty and one-element inputs, n not a multiple of the chunk and n over
three chunks (the parallel kernels), several keys in mixed directions, and top-k for
k in {1, 5, n, > n}; scans with sum, non-commutative combines and captured params."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from querycompute._codegen.ir import expr as E
from querycompute._codegen.dialects.numba_py import CHUNK
from querycompute._codegen.ir.program import ParamSpec
from querycompute._codegen.ir.stage_specs import ScanSpec, SortSpec
from querycompute.backends.cpu import cpu as _cpu
from querycompute.backends.cpu.cpu_stages import CpuStages
from querycompute.backends.stage_runtime import NumpyStages

CPU, REF = CpuStages(), NumpyStages()
BIG = 3 * CHUNK + 123                      # the parallel kernels, a ragged last chunk
KEY_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "float16", "float32", "float64"]


def keys_of(dtype: str, n: int, seed: int = 0, distinct: int = 50) -> np.ndarray:
    """n keys of `dtype` from a small pool (ties), with the type's edge values in it."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind == "f":
        pool = np.concatenate([rng.standard_normal(distinct) * 100,
                               [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf]]).astype(dt)
        pool[-5] = np.float16(np.nan) if dt == np.float16 else pool[-5]
    else:
        info = np.iinfo(dt)
        pool = np.concatenate([rng.integers(info.min, info.max, distinct, dtype=dt, endpoint=True),
                               np.array([info.min, info.max, 0, 1], dtype=dt)])
    return pool[rng.integers(0, len(pool), n)]


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.dtype.itemsize}") if a.dtype != bool else a


def spec_of(keys, desc) -> SortSpec:
    return SortSpec(tuple(str(k.dtype) for k in keys), tuple(desc))


@pytest.mark.parametrize("n", [0, 1, 7, 1000, BIG])
@pytest.mark.parametrize("dtype", KEY_DTYPES)
def test_item2_sort_one_key_equals_reference(dtype, n):
    x = keys_of(dtype, n, seed=n)
    for desc in (False, True):
        spec = spec_of([x], [desc])
        rows: list = []
        ref = REF.sort(spec, [x], None, [])
        perm = CPU.sort(spec, [x], None, rows)
        assert perm.dtype == np.int64 and np.array_equal(perm, ref)
        # the values themselves: -0.0 and NaN payloads come back exactly as they were
        assert np.array_equal(bits(CPU.sort_values(spec, x, rows)), bits(x[ref]))
        for k in (1, 5, n, n + 3):
            assert np.array_equal(CPU.sort(spec, [x], k, rows), ref[:k]), k
        assert all(r.dialect == "numba" and r.cache in ("memory", "compiled", "disk") for r in rows)


@pytest.mark.parametrize("n", [1, 100, BIG])
def test_item2_all_equal_keys_keep_index_order(n):
    for dtype in ("float32", "int64", "uint8"):
        x = np.full(n, 3, dtype=dtype)
        spec = spec_of([x], [True])
        assert np.array_equal(CPU.sort(spec, [x], None, []), np.arange(n))
        assert np.array_equal(CPU.sort(spec, [x], 5, []), np.arange(min(5, n)))
        keep = CPU.first_occurrence(spec, [x], [])
        assert keep[0] and not keep[1:].any()
    z = np.where(np.arange(n) % 2 == 0, 0.0, -0.0)            # -0.0 == 0.0: one key
    assert np.array_equal(CPU.sort(spec_of([z], [False]), [z], None, []), np.arange(n))


KEY_SETS = [("int8", "float32"), ("float16", "bool", "int16"), ("uint32", "float32"),
            ("float64", "int64"), ("int64", "float32", "uint8")]   # the last two: > 64 bits


@pytest.mark.parametrize("n", [0, 1, 999, BIG])
@pytest.mark.parametrize("dtypes", KEY_SETS)
def test_item2_multi_key_mixed_directions(dtypes, n):
    keys = [keys_of(d, n, seed=j, distinct=4) for j, d in enumerate(dtypes)]
    for desc in ([False] * len(keys), [j % 2 == 1 for j in range(len(keys))],
                 [j % 2 == 0 for j in range(len(keys))]):
        spec = spec_of(keys, desc)
        ref = REF.sort(spec, keys, None, [])
        assert np.array_equal(CPU.sort(spec, keys, None, []), ref)
        for k in (1, 5, n + 3):
            assert np.array_equal(CPU.sort(spec, keys, k, []), ref[:k])
    spec = spec_of(keys, [False] * len(keys))
    assert np.array_equal(CPU.first_occurrence(spec, keys, []), REF.first_occurrence(spec, keys, []))


@pytest.mark.parametrize("n", [0, 1, 500, BIG])
@pytest.mark.parametrize("dtype", KEY_DTYPES)
def test_item2_first_occurrence_equals_reference(dtype, n):
    x = keys_of(dtype, n, seed=7)
    spec = spec_of([x], [False])
    assert np.array_equal(CPU.first_occurrence(spec, [x], []), REF.first_occurrence(spec, [x], []))


def test_item2_first_occurrence_many_distinct_values():
    x = np.random.default_rng(3).random(BIG, dtype=np.float32)     # nearly all distinct
    x[::5] = np.roll(x, -3)[::5]                             # and some repeats
    spec = spec_of([x], [False])
    assert np.array_equal(CPU.first_occurrence(spec, [x], []), REF.first_occurrence(spec, [x], []))


@pytest.mark.parametrize("n", [0, 1, 10, BIG])
def test_item2_gather_every_column_type(n):
    rng = np.random.default_rng(n)
    perm = rng.permutation(n)[: n // 2 + (n > 0)].astype(np.int64)
    cols = [keys_of(d, n, seed=1) for d in KEY_DTYPES] + [np.arange(n, dtype=np.complex128)]
    got, ref = CPU.gather(cols, perm, []), REF.gather(cols, perm, [])
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype and np.array_equal(bits(g) if g.dtype.kind != "c" else g,
                                                     bits(r) if r.dtype.kind != "c" else r)


# ---- scan -----------------------------------------------------------------------------------
def _acc(d):
    return E.Var("acc", d)


def _item(d):
    return E.Var("item", d)


def scan_spec(d, combine, seed, params=(), name="qc_scan"):
    return ScanSpec(d, combine, E.Const(seed, d), tuple(params), name)


def sum_spec(d, seed=0):
    return scan_spec(d, E.Binary("add", _acc(d), _item(d), d), seed, name=f"qc_sum_{d}")


@pytest.mark.parametrize("n", [0, 1, 1000, BIG])
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16", "float16", "float32", "float64"])
def test_item2_scan_sum_equals_reference(dtype, n):
    rng = np.random.default_rng(n)
    x = rng.integers(-3, 4, n).astype(dtype)       # small ints: float sums are exact too
    spec = sum_spec(dtype, seed=2)
    rows: list = []
    got = CPU.scan(spec, x, (), rows)
    assert got.dtype == np.dtype(dtype)
    assert np.array_equal(got, REF.scan(spec, x, (), []))
    if n:
        assert rows and rows[-1].dialect == "numba"


def test_item2_scan_float_sum_is_deterministic_and_close(monkeypatch):
    x = np.random.default_rng(1).random(BIG).astype(np.float32)
    spec = sum_spec("float32")
    a, b = CPU.scan(spec, x, (), []), CPU.scan(spec, x.copy(), (), [])
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    np.testing.assert_allclose(a, np.cumsum(x, dtype=np.float64), rtol=1e-4)
    # one thread (what a forked child runs at any n) groups the combines the same way
    monkeypatch.setitem(_cpu._parallel, "allowed", False)
    serial = CPU.scan(spec, x, (), rows := [])
    assert rows and all(r.name.endswith("_inline") for r in rows if "chunks" in r.name or "totals" in r.name)
    assert np.array_equal(a.view(np.uint32), serial.view(np.uint32))


@pytest.mark.parametrize("n", [1, 77, BIG])
def test_item2_scan_non_commutative_and_params(n):
    rng = np.random.default_rng(n)
    x = rng.integers(-5, 6, n).astype(np.int32)
    d = "int32"
    last_nonzero = scan_spec(d, E.Where(E.Compare("ne", _item(d), E.Const(0, d)), _item(d), _acc(d), d),
                             -1, name="qc_ffill")
    ref = REF.scan(last_nonzero, x, (), [])
    assert np.array_equal(CPU.scan(last_nonzero, x, (), []), ref)
    p = E.Param("limit", d)
    last_above = scan_spec(d, E.Where(E.Compare("gt", _item(d), p), _item(d), _acc(d), d), 99,
                           params=[ParamSpec("limit", d)], name="qc_last_above")
    for limit in (2, 4):       # a captured value: a parameter, the same module
        assert np.array_equal(CPU.scan(last_above, x, (np.int32(limit),), []),
                              REF.scan(last_above, x, (np.int32(limit),), []))
    b = (x > 3)
    any_so_far = scan_spec("bool", E.Binary("or", _acc("bool"), _item("bool"), "bool"), False,
                           name="qc_any")
    assert np.array_equal(CPU.scan(any_so_far, b, (), []), REF.scan(any_so_far, b, (), []))


# ---- hypothesis: random small cases -------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.0, np.nan, np.inf, 7.0]), max_size=60),
       st.lists(st.integers(-3, 3), max_size=60), st.booleans(), st.booleans(),
       st.integers(0, 70))
def test_item2_random_keys_sort_topk_distinct(fs, ints, d0, d1, k):
    n = min(len(fs), len(ints))
    keys = [np.array(fs[:n], dtype=np.float32), np.array(ints[:n], dtype=np.int16)]
    spec = spec_of(keys, [d0, d1])
    ref = REF.sort(spec, keys, None, [])
    assert np.array_equal(CPU.sort(spec, keys, None, []), ref)
    assert np.array_equal(CPU.sort(spec, keys, k, []), ref[:k])
    assert np.array_equal(CPU.first_occurrence(spec, keys, []), REF.first_occurrence(spec, keys, []))
    assert np.array_equal(CPU.first_occurrence(spec, keys[:1], []), REF.first_occurrence(spec, keys[:1], []))


# ---- item 5: the benchmark script runs and its results pass its own checks -------------------
def test_item5_pipeline_ops_benchmark_smoke(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "pipeline_ops.py"
    out = subprocess.run([sys.executable, str(script), "--n", "300", "--repeat", "1",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    report = json.loads((tmp_path / "pipeline_ops.json").read_text())
    # which np.sort the ratios are against (issue 29: AVX-512 and AVX2 sorts differ 2x)
    import numpy as np
    assert report["np_sort"].startswith(f"NumPy {np.__version__}: ") and report["np_sort"] in out.stdout
    rows = {(r["case"], r["dtype"], r["impl"]): r for r in report["results"]}
    for case in ("sort", "argsort", "top100", "scan", "distinct"):
        for dtype in ("float32", "int64"):
            assert rows[(case, dtype, "runtime")]["status"] == "ok", rows[(case, dtype, "runtime")]
            assert rows[(case, dtype, "runtime")]["median_ms"] > 0
