"""Issue 29 (speed, session 17): two warm-path savings that must never show in a result.

- A join whose key is a field this side already stores (`li.l_orderkey` both carried and
  the key, TPC-H Q3/Q10) stores it once: the key column index is the element column's
  (stages.materialize, forward). Checked on the plan (JoinStage.keys) and against plain
  Python and the numpy backend: empty sides, duplicate keys, negative and extreme int64
  keys, NaN and -0.0 float keys, a left join.
- A fused group_by whose per-chunk tables overflowed (more than 4096 groups) is not tried
  again on as many rows (cpu_group_fused.CpuFusedGroup): the warm call goes to the two-step
  path at once, with the same bits; fewer rows try the fused pass again.
"""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute.plan.join_plan import JoinStage

I64 = np.iinfo(np.int64)


def joined(left: dict, right: dict, backend: str, outer: bool = False):
    q = qc.query(left).where(lambda r: r.v > -5.0)
    join = q.left_join if outer else q.join
    return join(qc.query(right), lambda r: r.k, lambda o: o.k,
                lambda r, o: {"k": r.k, "v": r.v, "w": o.w}).on(backend)


def plain(left: dict, right: dict, outer: bool = False) -> list:
    """LINQ's join order in plain Python: this side's order, then the other's matches."""
    def same(a, b):
        return a == b or (a != a and b != b)
    out = []
    for k, v in zip(left["k"].tolist(), left["v"].tolist()):
        if not v > -5.0:
            continue
        hits = [w for k2, w in zip(right["k"].tolist(), right["w"].tolist()) if same(k, k2)]
        if not hits and outer:
            hits = [0]
        out += [(k, v, w) for w in hits]
    return out


def rows(got: dict) -> list:
    return list(zip(got["k"].tolist(), got["v"].tolist(), got["w"].tolist()))


def same_rows(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert all(p == q or (p != p and q != q) for p, q in zip(x, y)), (x, y)


CASES = {
    "duplicates": ({"k": np.array([3, 1, 3, 2, 3, 9], np.int64), "v": np.arange(6.0)},
                   {"k": np.array([3, 3, 2, 7], np.int64), "w": np.array([10, 11, 12, 13], np.int32)}),
    "extreme": ({"k": np.array([I64.min, -1, 0, I64.max, -7], np.int64), "v": np.array([1.0, -9.0, 2.0, 3.0, 4.0])},
                {"k": np.array([I64.max, I64.min, -7, 5], np.int64), "w": np.array([1, 2, 3, 4], np.int32)}),
    "floats": ({"k": np.array([np.nan, -0.0, 1.5, np.nan, 2.5]), "v": np.array([0.0, 1.0, 2.0, 3.0, -6.0])},
               {"k": np.array([0.0, np.nan, 1.5]), "w": np.array([5, 6, 7], np.int32)}),
    "empty_left": ({"k": np.zeros(0, np.int64), "v": np.zeros(0)},
                   {"k": np.array([1, 2], np.int64), "w": np.array([1, 2], np.int32)}),
    "all_filtered": ({"k": np.array([1, 2], np.int64), "v": np.array([-9.0, -8.0])},
                     {"k": np.array([1, 2], np.int64), "w": np.array([1, 2], np.int32)}),
}


@pytest.mark.parametrize("outer", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_join_key_stored_once_same_rows(case, outer):
    left, right = CASES[case]
    q = joined(left, right, "cpu", outer)
    staged = q.lowered("to_array")[0]
    join = next(s for s in staged.stages if type(s) is JoinStage)
    assert join.keys == (0,) and join.element == 2        # the key is the element's k column
    ref = plain(left, right, outer)
    for backend in ("cpu", "numpy"):
        same_rows(rows(joined(left, right, backend, outer).to_array()), ref)


def test_join_key_computed_is_stored_apart():
    """A key that is no element column (r.k + 1) is still its own column."""
    left = {"k": np.array([1, 2, 3], np.int64), "v": np.array([1.0, 2.0, 3.0])}
    right = {"k": np.array([2, 4], np.int64), "w": np.array([1, 2], np.int32)}
    q = qc.query(left).where(lambda r: r.v > 0).join(qc.query(right), lambda r: r.k + 1, lambda o: o.k,
                                                     lambda r, o: {"k": r.k, "w": o.w}).on("cpu")
    join = next(s for s in q.lowered("to_array")[0].stages if type(s) is JoinStage)
    assert join.keys == (join.element,)                    # after the element columns
    got = q.to_array()
    assert got["k"].tolist() == [1, 3] and got["w"].tolist() == [1, 2]


def kernels() -> list:
    return [k.name for k in qc.last_trace().kernels]


def test_overflowed_fused_group_is_not_tried_again():
    rng = np.random.default_rng(5)
    n = 3 * 65536 + 11
    many = rng.integers(0, 20000, n).astype(np.int64)       # > 4096 groups in every chunk
    v = rng.random(n)
    q = qc.query(many, v).where(lambda k, v: v < 0.9).on("cpu").group_by(lambda k, v: k)
    first = q.agg(s=qc.sum(lambda k, v: v), c=qc.count)
    assert any("_fchunks_" in name for name in kernels())    # tried, gave up
    again = q.agg(s=qc.sum(lambda k, v: v), c=qc.count)
    assert not any("_fchunks_" in name for name in kernels())
    for f in ("key", "s", "c"):
        np.testing.assert_array_equal(first[f], again[f])      # bit for bit
    keep = v < 0.9
    keys, counts = np.unique(many[keep], return_counts=True)
    np.testing.assert_array_equal(again["key"], keys)
    np.testing.assert_array_equal(again["c"], counts)
    ref = qc.query(many, v).where(lambda k, v: v < 0.9).on("numpy").group_by(lambda k, v: k) \
        .agg(s=qc.sum(lambda k, v: v), c=qc.count)
    np.testing.assert_allclose(again["s"], ref["s"], rtol=1e-12)
    # fewer rows (few groups): the fused pass is tried again and answers
    few = (many[:70000] % 7).copy()
    small = qc.query(few, v[:70000]).where(lambda k, v: v < 0.9).on("cpu").group_by(lambda k, v: k) \
        .agg(s=qc.sum(lambda k, v: v), c=qc.count)
    assert any("_fchunks_" in name for name in kernels())
    np.testing.assert_array_equal(small["key"], np.arange(7))
    np.testing.assert_array_equal(small["c"], np.bincount(few[keep[:70000]], minlength=7))
