"""Issue 14 item 3 (the cpu backend's hash join, backends/cpu_join.py): the (left, right) row
pairs are ops/join/reference.join_reference's exactly (LINQ's order: left order, then right order
among a left row's matches; left_join's unmatched rows once with -1), whichever side is
built on (the smaller), serial or parallel probe, with the reference's equality (common
NumPy type, NaN == NaN, -0.0 == 0.0): duplicates on both sides, no matches, empty sides,
packed key tuples and tuples wider than 64 bits (the numpy reference, named in the trace);
and a join + group_by query on the cpu backend against the numpy backend and plain Python."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import querycompute as qc
from querycompute.backends.cpu.cpu_stages import CpuStages
from querycompute._codegen.ops.join.reference import join_reference

CPU = CpuStages()
POOL = np.array([np.nan, -np.nan, 0.0, -0.0, 1.0, -2.5, np.inf, 7.0])


def keys(rng, n: int, dtype: str, distinct: int) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        pool = np.concatenate([POOL, np.arange(distinct, dtype=float)])
        return pool[rng.integers(0, len(pool), n)].astype(dtype)
    return rng.integers(-3 if np.dtype(dtype).kind == "i" else 0, distinct, n).astype(dtype)


def check(left: list, right: list, outer: bool) -> list:
    rows: list = []
    got = CPU.join(left, right, outer, rows)
    ref = join_reference(left, right, outer)
    assert got[0].dtype == np.int64 and got[1].dtype == np.int64
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
    return rows


@settings(max_examples=30, deadline=None)
@given(nl=st.integers(0, 60), nr=st.integers(0, 60), seed=st.integers(0, 2**16),
       dts=st.sampled_from([("int64", "int64"), ("int32", "int64"), ("float64", "float32"),
                            ("int16", "float64"), ("uint8", "uint8"), ("bool", "bool")]),
       outer=st.booleans())
def test_item3_join_pairs_equal_reference(nl, nr, seed, dts, outer):
    rng = np.random.default_rng(seed)
    distinct = 2 if dts[0] == "bool" else 6          # duplicates on both sides, some misses
    check([keys(rng, nl, dts[0], distinct)], [keys(rng, nr, dts[1], distinct)], outer)


@pytest.mark.parametrize("nl, nr", [(200_000, 3_000), (3_000, 200_000)])     # built right / left
@pytest.mark.parametrize("outer", [False, True])
def test_item3_parallel_probe_both_build_sides(nl, nr, outer):
    rng = np.random.default_rng(nl)
    spread = 1_000_003                 # keys too sparse for the direct or ranked index
    left = [keys(rng, nl, "int64", 50_000) * spread]
    right = [keys(rng, nr, "int64", 50_000) * spread]
    rows = check(left, right, outer)
    # the build (one call), the probe's two steps by morsels, the left order restored (one call)
    steps = [r.name.removesuffix("_inline").removesuffix("_morsels") for r in rows]
    assert steps == (["join_build", "join_probe_counts", "join_probe_write"]
                     + ([] if nr <= nl else ["join_by_left"]))


def test_item3_no_matches_and_empty_sides():
    a, b = np.arange(10, dtype=np.int64), np.arange(100, 120, dtype=np.int64)
    for outer in (False, True):
        check([a], [b], outer)
        check([a[:0]], [b], outer)
        check([a], [b[:0]], outer)
        check([a[:0]], [b[:0]], outer)


def test_item3_key_tuples_packed_and_wide():
    rng = np.random.default_rng(5)
    left = [keys(rng, 500, "uint8", 4), keys(rng, 500, "float32", 5)]
    right = [keys(rng, 300, "uint8", 4), keys(rng, 300, "float32", 5)]
    rows = check(left, right, True)
    assert all(r.dialect == "numba" for r in rows)
    wide = check([keys(rng, 50, "int64", 3), keys(rng, 50, "float64", 3)],
                 [keys(rng, 40, "int64", 3), keys(rng, 40, "float64", 3)], False)
    assert [r.dialect for r in wide] == ["numpy"]       # wider than 64 bits: the reference


def test_item3_join_then_group_by_on_cpu_matches_numpy_and_python():
    rng = np.random.default_rng(9)
    n, m = 50_000, 4_000
    lines = {"key": rng.integers(0, 5_000, n).astype(np.int64), "mode": rng.integers(0, 7, n).astype(np.uint8),
             "day": rng.integers(0, 100, n).astype(np.int32)}
    orders = {"okey": rng.permutation(6_000)[:m].astype(np.int64), "prio": rng.integers(0, 5, m).astype(np.uint8)}

    def run(backend):
        return (qc.query(lines).where(lambda r: r.day < 40)
                .join(qc.query(orders), lambda r: r.key, lambda o: o.okey,
                      lambda r, o: {"mode": r.mode, "prio": o.prio})
                .on(backend).group_by(lambda r: r.mode)
                .agg(high=qc.sum(lambda r: int(r.prio <= 1)), n=qc.count))
    got = run("cpu")
    # (its orders' keys are dense: 4,000 of 6,000 values; the direct index probes them)
    assert any(r.name.startswith(("join_probe_", "join_dense_")) for r in qc.last_trace().kernels)
    ref = run("numpy")
    for name in ref:
        np.testing.assert_array_equal(got[name], ref[name])
    prio = dict(zip(orders["okey"].tolist(), orders["prio"].tolist()))
    py: dict = {}
    for k, mode, day in zip(lines["key"].tolist(), lines["mode"].tolist(), lines["day"].tolist()):
        if day < 40 and k in prio:
            high, cnt = py.get(mode, (0, 0))
            py[mode] = (high + (prio[k] <= 1), cnt + 1)
    assert got["key"].tolist() == sorted(py)
    assert got["high"].tolist() == [py[k][0] for k in sorted(py)]
    assert got["n"].tolist() == [py[k][1] for k in sorted(py)]
