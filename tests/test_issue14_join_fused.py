"""Issue 14 item 3: what follows a join fuses into the probe side's pass. On the cpu backend
the pass after the join reads left[li[k]] / right[ri[k]] through the join's index pairs
(dialects/numba_indexed.py): no gather runs. Results against the numpy backend (which still
gathers) and plain Python over join_reference's pairs."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import querycompute as qc
from querycompute.run import engine
from querycompute.backends.cpu.cpu_stages import CpuStages
from querycompute._codegen.ops.join.reference import join_reference

pytestmark = pytest.mark.skipif(not qc.backends()["cpu"]["available"], reason="needs numba")
SETTINGS = dict(deadline=None, max_examples=25,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def kernels_of_last_run() -> list:
    return [k.name for k in qc.last_trace().kernels]


def join_gathered() -> bool:
    """Whether the last run gathered the joined columns: a gather right after the join's
    kernels (a sort-based group_by's own gather comes later)."""
    names = kernels_of_last_run()
    at = max((i for i, k in enumerate(names) if k.startswith("join_")), default=None)
    if at is None:      # no join kernel ran: a where pushed before the join left no row
        return False
    return at + 1 < len(names) and names[at + 1].startswith("gather")


def gathered(monkeypatch, run):
    """run() on cpu planned as before: the join gathers both sides, the next pass reads the
    gathered columns (the plans in memory are dropped before and after)."""
    engine._memo.clear()
    with monkeypatch.context() as m:
        m.setattr(CpuStages, "caps", replace(CpuStages.caps, indexed_passes=False))
        got = run()
        assert join_gathered()
    engine._memo.clear()
    return got


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def where_sum(backend, left, right, outer):
    q = qc.query(left).on(backend)
    join = q.left_join if outer else q.join
    return join(qc.query(right), lambda a: a.k, lambda b: b.k,
                lambda a, b: {"v": a.v, "w": b.w, "f": b.f, "h": b.h}).where(lambda r: r.v > 2)


@given(data=st.data(), outer=st.booleans())
@settings(**SETTINGS)
def test_item3_join_where_sum_reads_through_pairs(data, outer):
    """join -> where -> sum / count / to_array on cpu (one indexed pass, no gather) equals the
    numpy backend and plain Python: duplicate keys on both sides, no matches, NaN and -0.0
    keys, empty sides; left_join's fills (NaN, 0, False, float16 NaN)."""
    keys = st.sampled_from([0.0, -0.0, 1.5, np.nan, 2.0, 7.0])
    lk = np.array(data.draw(st.lists(keys, max_size=14)), dtype=np.float64)
    rk = np.array(data.draw(st.lists(keys, max_size=14)), dtype=np.float32)
    left = {"k": lk, "v": np.arange(len(lk), dtype=np.int64) % 5}
    right = {"k": rk, "w": np.arange(len(rk), dtype=np.int32) + 1, "f": np.arange(len(rk)) % 2 == 0,
             "h": (np.arange(len(rk)) / 4).astype(np.float16)}
    cpu, ref = where_sum("cpu", left, right, outer), where_sum("numpy", left, right, outer)
    got = cpu.to_array()
    if len(lk) and len(rk):
        assert not join_gathered()
    want = ref.to_array()
    for name in ("v", "w", "f", "h"):
        assert same(got[name], want[name]), name
    li, ri = join_reference([lk], [rk], outer)
    rows = [(int(left["v"][i]), None if j < 0 else int(right["w"][j])) for i, j in zip(li, ri)]
    rows = [r for r in rows if r[0] > 2]
    assert got["v"].tolist() == [v for v, _ in rows]
    assert got["w"].tolist() == [0 if w is None else w for _, w in rows]
    assert cpu.count() == len(rows)
    assert cpu.sum(lambda r: r.v * r.w) == sum(v * (w or 0) for v, w in rows)
    assert cpu.sum(lambda r: r.h) == ref.sum(lambda r: r.h) or math.isnan(ref.sum(lambda r: r.h))


def test_item3_join_group_by_in_one_pass(monkeypatch):
    """join -> where -> group_by (the Q12 shape): the indexed pass and the group_by's tables
    in one pass on cpu, bit for bit the two-stage (gathering) cpu plan, equal to the numpy
    backend (float sums within 1e-12: its own fixed order); a left_join's unmatched rows group
    under the fill value; tuple keys."""
    rng = np.random.default_rng(14)
    orders = {"okey": rng.permutation(400).astype(np.int64), "prio": rng.integers(0, 5, 400).astype(np.int8)}
    items = {"okey": rng.integers(0, 500, 3000).astype(np.int64), "qty": rng.random(3000) * 50,
             "mode": rng.integers(0, 7, 3000).astype(np.uint8)}

    def q12(backend, outer):
        q = qc.query(items).on(backend).where(lambda i: i.qty > 5)
        join = q.left_join if outer else q.join
        g = join(qc.query(orders), lambda i: i.okey, lambda o: o.okey,
                 lambda i, o: {"mode": i.mode, "prio": o.prio, "qty": i.qty}) \
            .where(lambda x: x.mode != 3).group_by(lambda x: x.prio)
        return g.agg(high=qc.sum(lambda x: int(x.prio < 2)), n=qc.count, s=qc.sum(lambda x: x.qty),
                     m=qc.max(lambda x: x.mode))

    for outer in (False, True):
        want, two = q12("numpy", outer), gathered(monkeypatch, lambda: q12("cpu", outer))
        got = q12("cpu", outer)
        assert not join_gathered()
        assert got.keys() == want.keys() == two.keys()
        for name in got:
            assert same(got[name], two[name]), name
            if name == "s":
                np.testing.assert_allclose(got[name], want[name], rtol=1e-12)
            else:
                assert same(got[name], want[name]), name
    prio_of = dict(zip(orders["okey"].tolist(), orders["prio"].tolist()))
    rows = [prio_of[k] for k, v, m in zip(items["okey"].tolist(), items["qty"].tolist(), items["mode"].tolist())
            if v > 5 and m != 3 and k in prio_of]
    got = q12("cpu", False)
    assert got["key"].tolist() == sorted(set(rows))
    assert got["n"].tolist() == [rows.count(p) for p in sorted(set(rows))]

    # more groups than the fused tables hold: the indexed pass stores the key and value
    # columns, then the group_by runs on them
    lk, rw = rng.integers(0, 9000, 20000), rng.integers(0, 100, 8000)

    def many(backend):
        return qc.query(lk).on(backend).left_join(
            qc.query(k=np.arange(8000), w=rw), lambda a: a, lambda b: b.k,
            lambda a, b: (a, b.w)).group_by(lambda t: t[0]).agg(n=qc.count, s=qc.sum(lambda t: t[1]))
    want, got = many("numpy"), many("cpu")
    assert len(got["key"]) > 4096 and not join_gathered()
    for name in ("key", "n", "s"):
        assert same(got[name], want[name]), name

    a = qc.query(x=np.array([1, 1, 2, 3]), y=np.array([0, 1, 0, 0])).on("cpu")
    b = qc.query(x=np.array([1, 2, 1, 1]), y=np.array([1, 0, 1, 0]), z=np.array([7, 8, 9, 4]))
    pairs = a.left_join(b, lambda r: (r.x, r.y), lambda r: (r.x, r.y), lambda r, s: s.z * 10 + r.y)
    assert pairs.to_list() == [40, 71, 91, 80, 0]
    assert pairs.where(lambda v: v > 50).to_list() == [71, 91, 80]


def test_item3_explain_shows_join_and_next_pass_as_one_stage():
    l = qc.query(k=np.arange(10), v=np.arange(10.0)).on("cpu")
    q = l.join(qc.query(k=np.arange(5), w=np.ones(5)), lambda a: a.k, lambda b: b.k,
               lambda a, b: a.v * b.w).where(lambda x: x > 1)
    text = q.explain()
    assert "nothing is gathered" in text and "handed to the pass below as index pairs" in text
    assert "both sides gathered" in l.on("numpy").join(qc.query(k=np.arange(5)), lambda a: a.k, lambda b: b,
                                                        lambda a, b: a.v).explain()
    assert q.to_list() == [2.0, 3.0, 4.0]


def test_issue29_a_side_that_only_reads_source_columns_runs_no_pass():
    """A join (or semi-join) straight on a table whose key and carried fields are its columns
    as stored: the first pass would only copy them, so the cpu and numpy runtimes hand the
    source columns on (read-only: the table is unchanged) and no stage-1 kernel runs; a strided
    column, a where or a computed key run the pass; every result equals plain Python's."""
    rng = np.random.default_rng(29)
    a, v = rng.integers(0, 50, 5000), rng.standard_normal(5000)
    k = np.arange(0, 50, 3)
    want = [(x, y) for x, y in zip(a.tolist(), v.tolist()) if x % 3 == 0]
    a0, v0 = a.copy(), v.copy()
    for backend in ("cpu", "numpy"):
        q = qc.query(a=a, v=v).on(backend).join(qc.query(k=k), lambda r: r.a, lambda o: o.k,
                                                lambda r, o: {"a": r.a, "v": r.v})
        got = q.to_array()
        assert list(zip(got["a"].tolist(), got["v"].tolist())) == want
        assert not any(n.startswith("qc_stage1") for n in kernels_of_last_run()), kernels_of_last_run()
        assert "it only copies source columns" in q.explain()
        semi = qc.query(a=a, v=v).on(backend).intersect_by(qc.query(k=k), lambda r: r.a, lambda o: o.k)
        assert semi.select(lambda r: r.v).to_list() == [y for _, y in want]
        assert not any(n.startswith("qc_stage1") for n in kernels_of_last_run())
    assert np.array_equal(a, a0) and np.array_equal(v, v0)
    wide = np.stack([a, a], axis=1)[:, 0]                      # strided: the pass copies it
    for q in (qc.query(a=wide, v=v).on("cpu").join(qc.query(k=k), lambda r: r.a, lambda o: o.k,
                                                   lambda r, o: {"a": r.a, "v": r.v}),
              qc.query(a=a, v=v).on("cpu").join(qc.query(k=k * 2), lambda r: r.a * 2, lambda o: o.k,
                                                lambda r, o: {"a": r.a, "v": r.v}),
              qc.query(a=a, v=v).on("cpu").where(lambda r: r.v < 9.0).join(
                  qc.query(k=k), lambda r: r.a, lambda o: o.k, lambda r, o: {"a": r.a, "v": r.v})):
        got = q.to_array()
        assert list(zip(got["a"].tolist(), got["v"].tolist())) == want
        assert any(n.startswith("qc_stage1") for n in kernels_of_last_run()), kernels_of_last_run()


def test_issue29_a_distinct_of_source_columns_runs_no_first_pass():
    """distinct((a, b)) straight on a table's columns (and a per-group distinct count, which
    runs as one): the key columns are the source's, no stage-1 kernel; results equal plain
    Python's and the table is unchanged."""
    rng = np.random.default_rng(7)
    a, b = np.sort(rng.integers(0, 300, 20_000)), rng.integers(0, 4, 20_000).astype(np.int32)
    a0, b0 = a.copy(), b.copy()
    seen, want = set(), []
    for x, y in zip(a.tolist(), b.tolist()):
        if (x, y) not in seen:
            seen.add((x, y))
            want.append((x, y))
    for backend in ("cpu", "numpy"):
        got = qc.query(a=a, b=b).on(backend).distinct(lambda r: (r.a, r.b)).to_array()
        assert list(zip(got["a"].tolist(), got["b"].tolist())) == want
        assert not any(n.startswith("qc_stage1") for n in kernels_of_last_run()), kernels_of_last_run()
        g = qc.query(a=a, b=b).on(backend).group_by(lambda r: r.a).agg(n=qc.count_distinct(lambda r: r.b))
        assert g["n"].tolist() == [sum(1 for x, _ in want if x == k) for k in g["key"].tolist()]
    assert np.array_equal(a, a0) and np.array_equal(b, b0)
