"""Issue 14 items 3 and 5 (Q12's shape on the cpu backend: a selective filter, then a join
whose probes mostly miss): the compaction's sparse writer (under 1 survivor in
compact.SPARSE; the filter's bit words of 64 elements, then the set bits' values) and the
hash join's inner probe (bloom bit words, false positives cleared before the write pass)
give NumPy's and ops/join/reference.join_reference's results exactly: survivors at chunk and word
edges, n not a multiple of 64, duplicate keys on both sides, bloom false positives."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import querycompute as qc
from querycompute._codegen.ops.compact import SPARSE
from querycompute.backends.cpu.cpu_stages import CpuStages
from querycompute._codegen.ops.join.reference import join_reference

N = 3 * 65536 + 77          # 4 chunks, the last one short, not a multiple of 64


def sparse_columns():
    rng = np.random.default_rng(14)
    flag = rng.random(N) < 0.004                       # about 1 in 250 survive
    flag[[0, 63, 64, 65535, 65536, N - 1]] = True      # word and chunk edges
    flag[65536 * 2:65536 * 3] = False                  # a chunk without survivors
    return {"flag": flag.astype(np.uint8), "x": rng.standard_normal(N),
            "k": rng.integers(-9, 9, N).astype(np.int32)}


def test_item5_sparse_compaction_matches_numpy():
    t = sparse_columns()
    keep = t["flag"] == 1
    assert keep.sum() * SPARSE < N                     # the sparse writer's case
    got = (qc.query(t).where(lambda r: r.flag == 1 and r.k > -100)
           .select(lambda r: (r.x * 2.0, r.k)).on("cpu").to_array())
    np.testing.assert_array_equal(got[0], t["x"][keep] * 2.0)
    np.testing.assert_array_equal(got[1], t["k"][keep])


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 3_000), seed=st.integers(0, 2**16), per_mille=st.integers(0, 130))
def test_item5_sparse_compaction_serial_random_matches_numpy(n, seed, per_mille):
    """The serial flavour (n < SERIAL_MAX): survivors anywhere, the sparse or dense writer."""
    rng = np.random.default_rng(seed)
    flag = (rng.random(n) * 1000 < per_mille).astype(np.uint8)
    x = rng.standard_normal(n)
    got = qc.query(flag, x).where(lambda r: r[0] == 1).select(lambda r: r[1] + 1.0).on("cpu").to_array()
    np.testing.assert_array_equal(got, x[flag == 1] + 1.0)


@pytest.mark.parametrize("build_left", [False, True])
def test_item3_selective_probe_equals_reference(build_left):
    rng = np.random.default_rng(3)
    small = rng.integers(0, 1_000_000, 2_500).astype(np.int64)
    small[:40] = small[40:80]                          # duplicates on the built side
    big = rng.integers(0, 1_000_000, 200_003).astype(np.int64)
    big[::997] = small[rng.integers(0, 2_500, len(big[::997]))]   # matches, some repeated
    left, right = ([small], [big]) if build_left else ([big], [small])
    rows: list = []
    li, ri = CpuStages().join(left, right, False, rows)
    ref = join_reference(left, right, False)
    assert len(ref[0]) > 200
    np.testing.assert_array_equal(li, ref[0])
    np.testing.assert_array_equal(ri, ref[1])
    assert any(r.name.startswith("join_probe_write") for r in rows)


def test_item3_other_side_read_in_place_equals_numpy_backend():
    """The other query without operators over plain columns (a table, several arrays, one
    array) is read in place, and so is a key that only picks its columns (a computed key
    runs): same results as the numpy backend, its arrays untouched and never aliased by
    the result."""
    rng = np.random.default_rng(7)
    lines = {"key": rng.integers(0, 400, 5_000).astype(np.int64), "v": rng.standard_normal(5_000)}
    okey = rng.permutation(500)[:300].astype(np.int32)
    flag, w, prio = rng.random(300) < 0.5, rng.random(300).astype(np.float32), rng.integers(0, 5, 300).astype(np.uint8)
    table = {"okey": okey, "flag": flag, "w": w, "prio": prio}
    before = {k: a.copy() for k, a in table.items()}

    def run(backend, outer):
        q = qc.query(lines).where(lambda r: r.v > -0.5)
        joined = (q.left_join if outer else q.join)(
            qc.query(table), lambda r: r.key, lambda o: o.okey,
            lambda r, o: {"v": r.v, "flag": o.flag, "w": o.w, "prio": o.prio})
        pairs = q.join(qc.query(okey, w), lambda r: r.key, lambda o: o[0], lambda r, o: o[1] * r.v)
        single = q.join(qc.query(okey), lambda r: r.key, lambda o: o, lambda r, o: o + 1)
        computed = q.join(qc.query(table), lambda r: (r.key + 1, r.key % 3),        # key computed: runs
                          lambda o: (o.okey + 1, o.okey % 3), lambda r, o: o.w)
        return ([joined.on(backend).to_array()[c] for c in ("v", "flag", "w", "prio")]
                + [pairs.on(backend).to_array(), single.on(backend).to_array(), computed.on(backend).to_array()])
    for outer in (False, True):
        got, ref = run("cpu", outer), run("numpy", outer)
        for g, r in zip(got, ref):
            assert g.dtype == r.dtype
            np.testing.assert_array_equal(g, r)
            assert not any(np.may_share_memory(g, a) for a in table.values())
    for k, a in table.items():
        np.testing.assert_array_equal(a, before[k])
    at = {int(k): j for j, k in enumerate(okey)}          # plain Python: okey is distinct
    rows = [(v, at[k]) for k, v in zip(lines["key"].tolist(), lines["v"].tolist()) if v > -0.5 and k in at]
    got = run("cpu", False)
    assert got[0].tolist() == [v for v, _ in rows]
    assert got[1].tolist() == [bool(flag[j]) for _, j in rows]
    assert got[3].tolist() == [int(prio[j]) for _, j in rows]
    assert got[5].tolist() == [int(okey[j]) + 1 for _, j in rows]
    np.testing.assert_array_equal(got[6], got[2])                  # same pairs, key computed
