"""The cpu join's direct index (backends/cpu/cpu_join.py, ops/join/cpu_kernels.py "dense"): a
build side of one integer key whose values span at most DENSE_SPAN values per row is indexed
by key, not hashed. Its pairs are ops/join/reference.join_reference's exactly (LINQ's order,
duplicates on both sides, misses, outer rows with -1) whichever side is built, for every
integer type, keys outside the build side's range (negative, huge unsigned) included; sparse
keys keep the hash table. The trace names the route."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import querycompute as qc
from querycompute.backends.cpu import cpu_join
from querycompute.backends.cpu.cpu_stages import CpuStages
from querycompute._codegen.ops.join.reference import join_reference

CPU = CpuStages()


def pairs(left, right, outer):
    rows: list = []
    got = CPU.join([left], [right], outer, rows)
    ref = join_reference([left], [right], outer)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
    return [r.name.removesuffix("_inline").removesuffix("_morsels") for r in rows]


@settings(max_examples=40, deadline=None)
@given(nl=st.integers(0, 300), nr=st.integers(0, 300), seed=st.integers(0, 2**16),
       dts=st.sampled_from([("int64", "int64"), ("int32", "int64"), ("int8", "int16"), ("uint32", "uint32"),
                            ("uint64", "uint64"), ("uint8", "int32")]),
       base=st.sampled_from([0, -50, 1000]), dup=st.booleans(), outer=st.booleans())
def test_dense_pairs_equal_the_reference(nl, nr, seed, dts, base, dup, outer):
    rng = np.random.default_rng(seed)
    span = max(1, min(nl, nr) // (3 if dup else 1))           # dense: at most span values
    if "u" in (np.dtype(dts[0]).kind, np.dtype(dts[1]).kind):
        base = 0
    clip = [(np.iinfo(d).min, np.iinfo(d).max) for d in dts]    # (int8 near 1000: repeats)
    left = (base + rng.integers(-4, span + 4, nl)).clip(*clip[0]).astype(dts[0])     # some miss
    right = (base + rng.integers(0, span, nr)).clip(*clip[1]).astype(dts[1])
    pairs(left, right, outer)


@pytest.mark.parametrize("outer", [False, True])
@pytest.mark.parametrize("build_right", [True, False])
def test_primary_keys_are_indexed_directly(outer, build_right):
    rng = np.random.default_rng(1)
    pk = rng.permutation(np.arange(1, 200_001, dtype=np.int32))             # a primary key
    fk = rng.integers(-10, 210_000, 300_000).astype(np.int64)              # misses both ways
    left, right = (fk, pk) if build_right else (pk, fk[:150_000])
    steps = pairs(left, right, outer)
    assert steps[:3] == ["join_dense_build", "join_dense_counts", "join_dense_write"], steps


def test_repeated_build_keys_keep_index_order():
    right = np.repeat(np.arange(5, dtype=np.int64), 3)[::-1].copy()         # each key 3 times
    left = np.array([4, 0, 9, 2, 2, -1], np.int64)
    assert pairs(left, right, False)[0] == "join_dense_build"
    assert pairs(left, right, True)[0] == "join_dense_build"


def test_sparse_and_huge_keys_keep_the_hash_table():
    rng = np.random.default_rng(2)
    sparse = rng.integers(0, 10**12, 5000)
    assert pairs(sparse[rng.integers(0, 5000, 8000)], sparse, False)[0] == "join_build"
    huge = np.array([2**64 - 1, 2**63 + 5, 7, 8], np.uint64)              # above int64: hashed
    assert pairs(np.array([7, 2**64 - 1, 3], np.uint64), huge, True)[0] == "join_build"
    wide = np.arange(0, cpu_join.DENSE_SPAN * 100 + 200, 1, np.int64)[::cpu_join.DENSE_SPAN + 1]
    assert pairs(wide, wide[:100], False)[0] == "join_build"                # span > DENSE_SPAN per row


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_query_over_a_dense_primary_key(backend):
    rng = np.random.default_rng(3)
    parts = {"pk": np.arange(1, 2001, dtype=np.int32), "w": rng.random(2000)}
    lines = {"fk": rng.integers(0, 2100, 5000).astype(np.int32), "v": rng.random(5000)}
    got = (qc.query(lines).on(backend)
           .left_join(qc.query(parts), lambda r: r.fk, lambda p: p.pk, lambda r, p: r.v * p.w)
           .to_array())
    w = dict(zip(parts["pk"].tolist(), parts["w"].tolist()))
    want = [v * w[k] if k in w else np.nan for k, v in zip(lines["fk"].tolist(), lines["v"].tolist())]
    np.testing.assert_array_equal(got, np.array(want))
