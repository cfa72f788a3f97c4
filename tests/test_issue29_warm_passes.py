"""Issue 29 (speed, session 17): two warm-path savings that must never show in a result.

- A join whose key is a field this side already stores (`li.l_orderkey` both carried and
  the key, TPC-H Q3/Q10) stores it once: the key column index is the element column's
  (stages.materialize, forward). Checked on the plan (JoinStage.keys) and against plain
  Python and the numpy backend: empty sides, duplicate keys, negative and extreme int64
  keys, NaN and -0.0 float keys, a left join.
- A join side whose first pass filters source columns and computes nothing of the element
  (`q.where(p).join(...)` over a table) runs on the cpu as its `selects` variant
  (PassStage.selects): only the survivors' row numbers and keys are stored, and the pass
  after the join reads this side's source columns in place through them; the same rows as
  plain Python and the numpy backend (string and date columns, a left join, empty sides).
- A fused group_by whose per-chunk tables overflowed (more than 4096 groups) is not tried
  again on as many rows (cpu_group_fused.CpuFusedGroup): the warm call goes to the two-step
  path at once, with the same bits; fewer rows try the fused pass again.
"""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute.plan.join_plan import JoinStage
from querycompute.plan.stage_kinds import PassStage
from querycompute.run import engine

I64 = np.iinfo(np.int64)


def joined(left: dict, right: dict, backend: str, outer: bool = False):
    q = qc.query(left).where(lambda r: r.v > -5.0)
    join = q.left_join if outer else q.join
    return join(qc.query(right), lambda r: r.k, lambda o: o.k,
                lambda r, o: {"k": r.k, "v": r.v, "x": r.x, "w": o.w}).on(backend)


def plain(left: dict, right: dict, outer: bool = False) -> list:
    """LINQ's join order in plain Python: this side's order, then the other's matches."""
    def same(a, b):
        return a == b or (a != a and b != b)
    out = []
    for k, v, x in zip(left["k"].tolist(), left["v"].tolist(), left["x"].tolist()):
        if not v > -5.0:
            continue
        hits = [w for k2, w in zip(right["k"].tolist(), right["w"].tolist()) if same(k, k2)]
        if not hits and outer:
            hits = [0]
        out += [(k, v, x, w) for w in hits]
    return out


def rows(got: dict) -> list:
    return list(zip(got["k"].tolist(), got["v"].tolist(), got["x"].tolist(), got["w"].tolist()))


def same_rows(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert all(p == q or (p != p and q != q) for p, q in zip(x, y)), (x, y)


CASES = {
    "duplicates": ({"k": np.array([3, 1, 3, 2, 3, 9], np.int64), "v": np.arange(6.0), "x": np.arange(6.0) * -1.5},
                   {"k": np.array([3, 3, 2, 7], np.int64), "w": np.array([10, 11, 12, 13], np.int32)}),
    "extreme": ({"k": np.array([I64.min, -1, 0, I64.max, -7], np.int64), "v": np.array([1.0, -9.0, 2.0, 3.0, 4.0]), "x": np.array([np.inf, 1.0, -0.0, 2.0, np.nan])},
                {"k": np.array([I64.max, I64.min, -7, 5], np.int64), "w": np.array([1, 2, 3, 4], np.int32)}),
    "floats": ({"k": np.array([np.nan, -0.0, 1.5, np.nan, 2.5]), "v": np.array([0.0, 1.0, 2.0, 3.0, -6.0]), "x": np.arange(5.0)},
               {"k": np.array([0.0, np.nan, 1.5]), "w": np.array([5, 6, 7], np.int32)}),
    "empty_left": ({"k": np.zeros(0, np.int64), "v": np.zeros(0), "x": np.zeros(0)},
                   {"k": np.array([1, 2], np.int64), "w": np.array([1, 2], np.int32)}),
    "all_filtered": ({"k": np.array([1, 2], np.int64), "v": np.array([-9.0, -8.0]), "x": np.array([1.0, 2.0])},
                     {"k": np.array([1, 2], np.int64), "w": np.array([1, 2], np.int32)}),
}


@pytest.mark.parametrize("outer", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_join_key_stored_once_same_rows(case, outer):
    left, right = CASES[case]
    q = joined(left, right, "cpu", outer)
    staged = q.lowered("to_array")[0]
    join = next(s for s in staged.stages if type(s) is JoinStage)
    assert join.keys == (0,) and join.element == 3        # the key is the element's k column
    ref = plain(left, right, outer)
    for backend in ("cpu", "numpy"):
        same_rows(rows(joined(left, right, backend, outer).to_array()), ref)


def selecting(q) -> set:
    """The stages the cpu executor ran as their `selects` variant in q's last (warm) call."""
    q.to_array()
    q.to_array()                       # (warm: the record holds the prepared plan)
    rec = engine.last_record()
    return rec[4].selecting


@pytest.mark.parametrize("outer", [False, True])
def test_filtered_side_read_in_place(outer):
    left, right = CASES["duplicates"]
    q = joined(left, right, "cpu", outer)
    first = q.lowered("to_array")[0].stages[0]
    assert type(first) is PassStage and first.selects is not None and first.hands_on == (0, 1, 2)
    assert selecting(q) == {0}
    assert selecting(joined(left, right, "numpy", outer)) == set()      # numpy: the plain pass
    assert "row numbers and keys" in q.explain()


@pytest.mark.parametrize("outer", [False, True])
def test_sparse_survivors_switch_to_the_plain_pass(outer):
    """A call keeping fewer than one row in SELECT_DENSITY leaves `selects` for the next call
    (each survivor read in place would cost a cache miss per column): the plain pass, compiled
    then, copies them; a dense call switches back. The rows are the same either way."""
    rng = np.random.default_rng(3)
    n = 4000
    k = rng.integers(0, 50, n).astype(np.int64)
    sparse = {"k": k, "v": np.where(np.arange(n) % 40 == 0, 1.0, -9.0), "x": rng.random(n)}
    dense = {"k": k, "v": np.where(np.arange(n) % 2 == 0, 1.0, -9.0), "x": rng.random(n)}
    right = {"k": np.arange(0, 60, 2, dtype=np.int64), "w": np.arange(30, dtype=np.int32)}
    q = joined(sparse, right, "cpu", outer)
    assert selecting(q) == set()
    same_rows(rows(q.to_array()), plain(sparse, right, outer))
    q2 = joined(dense, right, "cpu", outer)
    assert selecting(q2) == {0}
    same_rows(rows(q2.to_array()), plain(dense, right, outer))


def test_narrow_filtered_side_keeps_its_pass():
    """One uint8 element column (TPC-H Q12's shape): its survivors' row numbers would be more
    bytes than the column, so no `selects` variant."""
    left = {"k": np.array([1, 2, 3], np.int64), "m": np.array([5, 6, 7], np.uint8), "v": np.array([1.0, 0.0, 2.0])}
    right = {"k": np.array([3, 1], np.int64), "w": np.array([1, 2], np.int32)}
    q = qc.query(left).where(lambda r: r.v > 0).join(qc.query(right), lambda r: r.k, lambda o: o.k,
                                                     lambda r, o: {"m": r.m, "w": o.w}).on("cpu")
    assert q.lowered("to_array")[0].stages[0].selects is None
    got = q.to_array()
    assert got["m"].tolist() == [5, 7] and got["w"].tolist() == [2, 1]


def test_filtered_side_strings_and_dates():
    """String codes and datetime64 columns handed on in place, read through the rows."""
    left = {"k": np.array([4, 1, 4, 2, 3], np.int64),
            "name": np.array(["d", "a", "", "b\u00e9", "c"]),
            "day": np.array(["2024-01-05", "2024-02-01", "NaT", "2023-12-31", "2024-03-03"], "datetime64[D]"),
            "v": np.array([1.0, 2.0, 3.0, -9.0, 5.0])}
    right = {"k": np.array([4, 2, 3, 4], np.int64), "w": np.array([7, 8, 9, 10], np.int32)}

    def q(backend):
        return qc.query(left).where(lambda r: r.v > 0).join(
            qc.query(right), lambda r: r.k, lambda o: o.k,
            lambda r, o: {"name": r.name, "day": r.day, "w": o.w}).on(backend)
    assert selecting(q("cpu")) == {0}
    got, ref = q("cpu").to_array(), q("numpy").to_array()
    expect = [(n, d, w) for k, n, d, v in zip(left["k"], left["name"], left["day"], left["v"]) if v > 0
              for k2, w in zip(right["k"], right["w"]) if k == k2]
    assert list(got["name"]) == [e[0] for e in expect] == list(ref["name"])
    np.testing.assert_array_equal(got["day"], np.array([e[1] for e in expect], "datetime64[D]"))
    assert got["day"].dtype == left["day"].dtype
    assert got["w"].tolist() == [int(e[2]) for e in expect] == ref["w"].tolist()


def test_filtered_side_group_by_after_join():
    """The fused group_by after the join reads the in-place columns too (TPC-H Q3's shape)."""
    rng = np.random.default_rng(2)
    n = 2 * 65536 + 5
    lines = {"ok": rng.integers(0, 5000, n).astype(np.int64), "day": rng.integers(0, 100, n).astype(np.int32),
             "price": rng.random(n) * 100, "qty": rng.integers(1, 50, n).astype(np.float64)}
    orders = {"ok": np.arange(0, 5000, 3, dtype=np.int64), "prio": rng.integers(0, 5, 1667).astype(np.int32)}

    def q(backend):
        return (qc.query(lines).where(lambda li: li.day > 40)
                .join(qc.query(orders), lambda li: li.ok, lambda o: o.ok,
                      lambda li, o: {"ok": li.ok, "prio": o.prio, "rev": li.price * li.qty})
                .on(backend).group_by(lambda r: (r.ok, r.prio)).agg(rev=qc.sum(lambda r: r.rev), c=qc.count))
    got, ref = q("cpu"), q("numpy")
    keep = (lines["day"] > 40) & (lines["ok"] % 3 == 0)
    keys, counts = np.unique(lines["ok"][keep], return_counts=True)
    np.testing.assert_array_equal(got["key_0"], keys)
    np.testing.assert_array_equal(got["c"], counts)
    np.testing.assert_array_equal(got["key_1"], ref["key_1"])
    np.testing.assert_allclose(got["rev"], ref["rev"], rtol=1e-13)


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
    # few keys in the first 65536 rows (the first-chunk estimate lets the fused table try),
    # then > 4096 groups in the later chunks (it gives up there)
    many = np.concatenate([rng.integers(0, 100, 65536), rng.integers(0, 20000, n - 65536)]).astype(np.int64)
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
