"""The cpu join's direct index (backends/cpu/cpu_join.py, ops/join/cpu_kernels.py "dense"): a
build side of one integer key whose values span at most DENSE_SPAN values per row is indexed
by key, not hashed; one spanning at most DENSE_BITS values per row by the rank of its bit in a
bitmap of the range ("ranked"). Its pairs are ops/join/reference.join_reference's exactly (LINQ's order,
duplicates on both sides, misses, outer rows with -1) whichever side is built, for every
integer type, keys outside the build side's range (negative, huge unsigned) included; sparse
keys keep the hash table. The trace names the route."""
from __future__ import annotations

from unittest import mock

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
    step = cpu_join.DENSE_BITS * cpu_join.DENSE_MIN_ROWS
    wide = np.arange(0, step * 3, step, np.int64)                           # span > DENSE_BITS per row
    assert pairs(np.array([0, 5, step, 2 * step], np.int64), wide, False)[0] == "join_build"


@settings(max_examples=40, deadline=None)
@given(nl=st.integers(0, 300), nr=st.integers(1, 300), seed=st.integers(0, 2**16),
       dts=st.sampled_from([("int64", "int64"), ("int32", "int64"), ("int16", "int16"), ("uint32", "uint32"),
                            ("uint64", "uint64"), ("uint8", "int64")]),
       gap=st.integers(cpu_join.DENSE_SPAN + 1, 60), dup=st.booleans(), outer=st.booleans(),
       neg=st.booleans())
def test_ranked_pairs_equal_the_reference(nl, nr, seed, dts, gap, dup, outer, neg):
    """Keys spread over more than DENSE_SPAN values per row (a filtered primary key): the
    ranked index gives the reference's pairs, duplicates, misses below, inside and above the
    range and outer rows included."""
    rng = np.random.default_rng(seed)
    distinct = max(1, nr // (3 if dup else 1))
    kinds = [np.dtype(d) for d in dts]
    base = -(gap * distinct) // 2 if neg and all(k.kind == "i" for k in kinds) else 0
    keys = base + np.sort(rng.choice(gap * distinct + 1, distinct, replace=False))
    keys = np.concatenate([keys, [base + gap * distinct]])        # the range: >= DENSE_SPAN per row
    right = rng.choice(keys, nr)
    left = np.concatenate([rng.choice(keys, nl // 2), base - 3 + rng.integers(0, gap * distinct + 6, nl - nl // 2)])
    rng.shuffle(left)
    clip = [(np.iinfo(d).min, np.iinfo(d).max) for d in kinds]
    left, right = left.clip(*clip[0]).astype(kinds[0]), right.clip(*clip[1]).astype(kinds[1])
    with mock.patch.object(cpu_join, "RANKED_MIN_ROWS", 1):       # (small inputs: the threshold)
        pairs(left, right, outer)


@pytest.mark.parametrize("outer", [False, True])
@pytest.mark.parametrize("build_right", [True, False])
def test_filtered_primary_keys_are_ranked(outer, build_right):
    """Q5's shape: one order key in 20 kept (sparse for the direct index, dense for a bitmap),
    probed by a foreign key with repeats and misses on both sides of the range."""
    rng = np.random.default_rng(4)
    pk = rng.permutation(np.arange(1, 800_001, 20, dtype=np.int64))        # 20 values per row
    assert len(pk) >= cpu_join.RANKED_MIN_ROWS
    fk = rng.integers(-10, 810_000, 300_000).astype(np.int64)
    fk[::7] = rng.choice(pk, len(fk[::7]))                                 # and many hits
    left, right = (fk, pk) if build_right else (pk, fk[:100_000])
    steps = pairs(left, right, outer)
    assert steps[:3] == ["join_rank_build", "join_dense_counts", "join_dense_write"], steps


def test_ranked_extreme_keys():
    """The top of int64 and uint64 below 2**63, and the bottom of int64: the bitmap's offsets
    wrap nowhere; keys of the other side beyond the range (int64 min, uint64 max) miss."""
    with mock.patch.object(cpu_join, "RANKED_MIN_ROWS", 1):
        _ranked_extreme_keys()


def _ranked_extreme_keys():
    top = np.iinfo(np.int64).max
    hi = np.array([top - 1000, top - 300, top - 300, top], np.int64)
    assert pairs(np.array([top, top - 300, np.iinfo(np.int64).min, 0, top - 1], np.int64), hi, True)[0] \
        == "join_rank_build"
    lo = np.array([np.iinfo(np.int64).min + k for k in (0, 100, 900)], np.int64)
    assert pairs(np.array([np.iinfo(np.int64).min, -1, lo[1], top], np.int64), lo, False)[0] == "join_rank_build"
    u = np.array([2**63 - 1000, 2**63 - 1], np.uint64)
    assert pairs(np.array([2**64 - 1, 2**63 - 1, 2**63, 0], np.uint64), u, True)[0] == "join_rank_build"


def test_small_sparse_build_sides_keep_the_hash_table():
    """Under RANKED_MIN_ROWS rows a sparse build side is hashed (its table stays in L2)."""
    keys = np.arange(0, 64 * 100, 10, dtype=np.int64)
    assert pairs(keys[::3], keys, False)[0] == "join_build"


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
